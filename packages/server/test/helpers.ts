import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { type Clock, type ImageResolver, type RunningServer, type ServerConfigInput, startServer } from "../src/index.js";

export interface TestServer {
  server: RunningServer;
  url: string;
  key: string;
  dataDir: string;
  api(method: string, p: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  waitRunning(id: string, timeoutMs?: number): Promise<any>;
  close(): Promise<void>;
}

export type Api = TestServer["api"];

/**
 * A client of the JSON API at `baseUrl` with the key `key()` answers: a Uint8Array body goes as
 * is, anything else as JSON; the answer's body is parsed JSON, or its text when it is not JSON.
 */
export function jsonApi(baseUrl: string, key: () => string): Api {
  return async (method, p, body, headers = {}) => {
    const res = await fetch(baseUrl + p, {
      method,
      headers: {
        authorization: `Bearer ${key()}`,
        ...(body !== undefined && !(body instanceof Uint8Array) ? { "content-type": "application/json" } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: body instanceof Uint8Array ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed };
  };
}

/** A real server on a random loopback port over a fresh data dir. */
export async function startTestServer(
  opts: {
    images?: ImageResolver;
    logStream?: { write(line: string): unknown };
    /** The metering clock (default: the system's). */
    clock?: Clock;
    /** The price table (ServerConfig.prices). */
    prices?: ServerConfigInput["prices"];
  } = {},
): Promise<TestServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-test-"));
  // Many of these servers run at once in one network namespace: no sandbox networks here
  // (network.test.ts runs its server in namespaces of its own).
  const server = await startServer(
    {
      dataDir,
      host: "127.0.0.1",
      port: 0,
      logger: opts.logStream !== undefined,
      network: "off",
      ...(opts.prices ? { prices: opts.prices } : {}),
    },
    opts,
  );
  const key = server.firstKey ?? "";
  const api = jsonApi(server.url, () => key);
  return {
    server,
    url: server.url,
    key,
    dataDir,
    api,
    async waitRunning(id, timeoutMs = 240_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await api("GET", `/v1/sandboxes/${id}`);
        if (r.body.status === "RUNNING") return r.body;
        if (["ERROR", "TERMINATED", "TIMEOUT"].includes(r.body.status)) {
          throw new Error(`sandbox ${id} ended ${r.body.status}: ${r.body.error_reason}`);
        }
        if (Date.now() > deadline) throw new Error(`sandbox ${id} still ${r.body.status}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    },
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The file of a checkpoint's layer (what the blob store holds), read from the server's database. */
export function layerFile(dataDir: string, checkpointId: string): string {
  const db = new Database(path.join(dataDir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare("SELECT blob_key FROM checkpoints WHERE id = ?").get(checkpointId) as { blob_key: string } | undefined;
    if (!row?.blob_key) throw new Error(`checkpoint ${checkpointId} has no layer`);
    return path.join(dataDir, "layers", row.blob_key);
  } finally {
    db.close();
  }
}

export function qemuPidsFor(ids: string[]): string[] {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  } catch {}
  return out.split("\n").filter((l) => ids.some((id) => l.includes(`sandtree-${id}`)));
}

/** utime + stime of a process, in clock ticks. */
export function cpuTicks(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(f[11]) + Number(f[12]);
}
