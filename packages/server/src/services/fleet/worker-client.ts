import { ERROR_STATUS, isErrorCode, SandtreeError } from "@sandtree/protocol";
import type { RemoteHost } from "./host-names.js";

/** The header that gives a create on a worker the control plane's sandbox id (honored only for the control plane's key). */
export const SANDBOX_ID_HEADER = "x-sandtree-sandbox-id";

/** The header that gives a checkpoint on a worker the control plane's checkpoint id (the control plane's key only). */
export const CHECKPOINT_ID_HEADER = "x-sandtree-checkpoint-id";

/** How long one JSON call into a worker may take (a create answers once admitted; a delete stops a VM). */
const CALL_MS = 60_000;

/**
 * JSON calls from the control plane into a worker's sandbox API, with the host's call key.
 * A worker's error answer comes back as the same SandtreeError (its code and status); a
 * worker that cannot be reached is WORKER_UNREACHABLE.
 */
export class WorkerClient {
  async call(
    host: RemoteHost,
    method: "GET" | "POST" | "DELETE",
    path: string,
    o: { body?: unknown; sandboxId?: string; checkpointId?: string; signal?: AbortSignal; timeoutMs?: number },
  ): Promise<unknown> {
    const deadline = AbortSignal.timeout(o.timeoutMs ?? CALL_MS);
    const signal = o.signal ? AbortSignal.any([o.signal, deadline]) : deadline;
    const send = () =>
      fetch(new URL(path, host.url), {
        method,
        headers: {
          authorization: `Bearer ${host.key}`,
          ...(o.body !== undefined ? { "content-type": "application/json" } : {}),
          ...(o.sandboxId ? { [SANDBOX_ID_HEADER]: o.sandboxId } : {}),
          ...(o.checkpointId ? { [CHECKPOINT_ID_HEADER]: o.checkpointId } : {}),
        },
        ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
        signal,
      });
    let res: Response;
    try {
      res = await send().catch(async (err: unknown) => {
        // No answer at all (a kept-alive connection the worker closed as it was reused, a reset):
        // a read or a delete is sent once more; a POST is not (it may have been taken).
        if (method === "POST" || signal.aborted) throw err;
        await new Promise((r) => setTimeout(r, 100));
        return send();
      });
    } catch (err) {
      throw unreachable(host, withCause(err as Error));
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      throw unreachable(host, `${method} ${path} answered ${res.status} without JSON`);
    }
    if (res.ok) return parsed;
    const e = (parsed ?? {}) as { code?: unknown; message?: unknown; details?: unknown };
    const code = typeof e.code === "string" && isErrorCode(e.code) ? e.code : null;
    if (res.status === 401 || !code || ERROR_STATUS[code] !== res.status) {
      throw unreachable(host, `${method} ${path} answered ${res.status} ${String(e.code ?? "")} ${String(e.message ?? "")}`);
    }
    throw new SandtreeError(
      code,
      String(e.message ?? code),
      typeof e.details === "object" && e.details !== null ? (e.details as Record<string, unknown>) : undefined,
    );
  }
}

/** fetch's "fetch failed" with what undici said under it (ECONNRESET, other side closed, ...). */
function withCause(err: Error): string {
  const c = err.cause as (Error & { code?: string }) | undefined;
  return c instanceof Error ? `${err.message} (${[c.code, c.message].filter(Boolean).join(": ")})` : err.message;
}

export function unreachable(host: RemoteHost, why: string): SandtreeError {
  return new SandtreeError("WORKER_UNREACHABLE", `the worker ${host.name} holding this sandbox did not answer: ${why}`, {
    host: host.name,
  });
}
