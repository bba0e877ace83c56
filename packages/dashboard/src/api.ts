// The API client: the key lives in sessionStorage (this tab only, gone when it closes) and goes
// in the Authorization header, never in a URL.
import type {
  Checkpoint,
  DesktopInfo,
  ExecResult,
  Sandbox,
  SandboxList,
  SandboxLogs,
  Stats,
  UsageReport,
  VolumeList,
} from "@sandtree/protocol";

const KEY = "sandtree.api_key";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function storeKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, key);
}

async function call<T>(method: string, path: string, body?: unknown, key = storedKey()): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${key ?? ""}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch (err) {
    throw new ApiError(0, "NETWORK", `the server did not answer (${(err as Error).message})`);
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const e = (parsed ?? {}) as { code?: string; message?: string };
    throw new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? (text.slice(0, 200) || res.statusText));
  }
  return (parsed ?? text) as T;
}

function query(params: Record<string, string | string[] | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

export type UsageParams = {
  from?: string;
  to?: string;
  group_by: string;
  label_key?: string;
};

export const api = {
  /** Checks a key before it is stored: any authenticated read will do. */
  check: (key: string) => call<SandboxList>("GET", "/v1/sandboxes?limit=1", undefined, key),
  stats: (windowHours = 24, bucketMinutes = 30) =>
    call<Stats>("GET", `/v1/stats${query({ window_hours: windowHours, bucket_minutes: bucketMinutes })}`),
  sandboxes: (p: { status?: string | undefined; label?: string[]; limit?: number; cursor?: string | undefined }) =>
    call<SandboxList>("GET", `/v1/sandboxes${query(p)}`),
  sandbox: (id: string) => call<Sandbox>("GET", `/v1/sandboxes/${encodeURIComponent(id)}`),
  logs: (id: string) => call<SandboxLogs>("GET", `/v1/sandboxes/${encodeURIComponent(id)}/logs`),
  exec: (id: string, command: string) =>
    call<ExecResult>("POST", `/v1/sandboxes/${encodeURIComponent(id)}/exec`, { command, timeout_seconds: 60 }),
  checkpoints: () => call<{ checkpoints: Checkpoint[] }>("GET", "/v1/checkpoints"),
  volumes: () => call<VolumeList>("GET", "/v1/volumes"),
  usage: (p: UsageParams) => call<UsageReport>("GET", `/v1/usage${query(p)}`),
  desktop: (id: string) => call<DesktopInfo>("GET", `/v1/sandboxes/${encodeURIComponent(id)}/desktop`),
  usageCsv: (p: UsageParams) => call<string>("GET", `/v1/usage${query({ ...p, format: "csv" })}`),
};
