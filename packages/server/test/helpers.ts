import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { MachineHost } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import Database from "better-sqlite3";
import { afterAll, beforeAll } from "vitest";
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

/** Images that exist but never finish pulling: a sandbox stays PROVISIONING (active) without a VM (a FakeHost's images). */
export const neverPulls: ImageResolver = {
  async check() {},
  resolve: (_ref, { signal }) =>
    new Promise((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true })),
  async list() {
    return [];
  },
  importLayout: () => Promise.reject(new Error("not here")),
};

/**
 * A FakeHost for a test server and the server's data dir: the host's layers directory is the
 * server's blob store's (`<dataDir>/layers`) and its volumes directory `<dataDir>/volumes`, as
 * the default QEMU host's are. Give both to startTestServer.
 */
export function fakeHostAt(opts: ConstructorParameters<typeof FakeHost>[0] = {}): { host: FakeHost; dataDir: string } {
  const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-test-"));
  return {
    host: new FakeHost({ ...opts, layersDir: path.join(dataDir, "layers"), volumesDir: path.join(dataDir, "volumes") }),
    dataDir,
  };
}

/** What a test server is started with (all optional). */
export interface TestServerOptions {
  logStream?: { write(line: string): unknown };
  /** The metering clock (default: the system's). */
  clock?: Clock;
  /** The price table (ServerConfig.prices). */
  prices?: ServerConfigInput["prices"];
  /** A postgres:// URL (ServerConfig.database); default: SQLite in the data dir. */
  database?: string;
  /** Where layers are stored (ServerConfig.blobStore); default the data dir's layers directory. */
  blobStore?: string;
  /** Chains this deep get flattened (ServerConfig.flattenDepth). */
  flattenDepth?: number;
  /** Where names without a registry are pulled from (ServerConfig.defaultRegistry; default Docker Hub). */
  defaultRegistry?: string;
  /** Where machines run (default: QEMU microVMs; tests above the seam give the fake host). */
  host?: MachineHost;
  /** Sandbox networks (ServerConfig.network; default "off"): "on" only with a host whose networks are in memory (the fake's). */
  network?: "on" | "off";
  /** VM deadlines over the defaults (StartServerOptions.deadlines). */
  deadlines?: { agentMs?: number };
  /** The data dir (default: a fresh temporary one); kept after close() with `keepDataDir` or KEEP_TEST_DATA. */
  dataDir?: string;
  keepDataDir?: boolean;
}

/** A real server on a random loopback port over a fresh data dir. */
export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(tmpdir(), "sandtree-test-"));
  // Many of these servers run at once in one network namespace: no sandbox networks here
  // (network.test.ts runs its server in namespaces of its own).
  const server = await startServer(
    {
      dataDir,
      host: "127.0.0.1",
      port: 0,
      logger: opts.logStream !== undefined,
      network: opts.network ?? "off",
      ...(opts.prices ? { prices: opts.prices } : {}),
      ...(opts.database ? { database: opts.database } : {}),
      ...(opts.blobStore ? { blobStore: opts.blobStore } : {}),
      ...(opts.flattenDepth ? { flattenDepth: opts.flattenDepth } : {}),
      ...(opts.defaultRegistry ? { defaultRegistry: opts.defaultRegistry } : {}),
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
      if (!opts.keepDataDir && !process.env.KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * One server for the whole test file: started before its tests (beforeAll), closed after them
 * (afterAll). Read the handle inside tests and hooks: before the server is up it throws.
 */
export function serverForFile(opts: TestServerOptions = {}): TestServer {
  let current: TestServer | undefined;
  beforeAll(async () => {
    current = await startTestServer(opts);
  });
  afterAll(async () => {
    await current?.close();
  });
  const now = (): TestServer => {
    if (!current) throw new Error("the file's test server is not up yet: use it inside a test or hook");
    return current;
  };
  return {
    get server() {
      return now().server;
    },
    get url() {
      return now().url;
    },
    get key() {
      return now().key;
    },
    get dataDir() {
      return now().dataDir;
    },
    api: (...args) => now().api(...args),
    waitRunning: (...args) => now().waitRunning(...args),
    close: () => now().close(),
  };
}

/** A temporary directory for the test file (or describe), made now and removed after its tests. */
export function tempDirForFile(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A test server with one small busybox sandbox RUNNING: the setup of many one-sandbox VM files. */
export async function startWithBusybox(): Promise<{ t: TestServer; id: string }> {
  const t = await startTestServer();
  try {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
    await t.waitRunning(r.body.id);
    return { t, id: r.body.id };
  } catch (err) {
    await t.close();
    throw err;
  }
}

/** startWithBusybox for the whole file: up before its tests (`set` hears it), closed after them. */
export function busyboxForFile(set: (started: { t: TestServer; id: string }) => void): void {
  let started: { t: TestServer; id: string } | undefined;
  beforeAll(async () => {
    started = await startWithBusybox();
    set(started);
  });
  afterAll(async () => {
    await started?.t.close();
  });
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

/** Polls until the checkpoint is DURABLE or FAILED (its row then); throws after `timeoutMs`. */
export async function settleCheckpoint(t: TestServer, cid: string, timeoutMs = 120_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await t.api("GET", `/v1/checkpoints/${cid}`);
    if (r.body.state === "DURABLE" || r.body.state === "FAILED") return r.body;
    if (Date.now() > deadline) throw new Error(`checkpoint ${cid} still ${r.body.state}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Polls `fn` every `everyMs` until it answers something other than undefined; throws naming `what` after `timeoutMs`. */
export async function pollFor<T>(
  what: string,
  fn: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  everyMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The lines of QEMU processes whose command line names one of these sandbox ids. */
export function qemuPidsFor(ids: string[]): string[] {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  } catch {}
  return out.split("\n").filter((l) => ids.some((id) => l.includes(`sandtree-${id}`)));
}

/**
 * SIGKILLs every QEMU whose command line names `runRoot` (a server's socket folder) or one of the
 * sandbox `ids`: the teardown of a test that killed its server, so no VM of it survives.
 */
export function killQemusOf(runRoot: string, ids: readonly string[]): void {
  let lines = "";
  try {
    lines = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  } catch {}
  for (const line of lines.split("\n")) {
    if (!line.includes(`${runRoot}/`) && !ids.some((id) => line.includes(`sandtree-${id}`))) continue;
    try {
      process.kill(Number.parseInt(line, 10), "SIGKILL");
    } catch {}
  }
}

/** utime + stime of a process, in clock ticks. */
export function cpuTicks(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(f[11]) + Number(f[12]);
}

const CLI_MAIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../cli/dist/main.js");

/**
 * Starts `sandtree serve` as a child process (so a test can kill it with any signal) on a free
 * port; resolves once it listens, with its URL and the default team's key from credentials.env.
 * The server listens before the VMs it finds are adopted: adoption goes on in the background.
 */
export async function spawnServe(
  dataDir: string,
  opts: { env?: Record<string, string>; onOutput?: (text: string) => void; port?: number } = {},
): Promise<{ proc: ChildProcess; url: string; key: string }> {
  const { proc, match } = await spawnUntil(
    [process.execPath, CLI_MAIN, "serve", "--data-dir", dataDir, "--host", "127.0.0.1", "--port", String(opts.port ?? 0)],
    { SANDTREE_LOG_LEVEL: "warn", ...opts.env },
    /(?:SANDTREE_API_URL=|listening on )(http:\/\/[\d.:]+)/,
    { what: "server did not start", ...(opts.onOutput ? { onOutput: opts.onOutput } : {}) },
  );
  const key = /SANDTREE_API_KEY=(\S+)/.exec(readFileSync(path.join(dataDir, "credentials.env"), "utf8"))?.[1] ?? "";
  return { proc, url: match[1] ?? "", key };
}

/**
 * Spawns `argv` (its program first; `env` on top of this process's) with its stdout and stderr
 * captured, and resolves once `pattern` matches what it printed. A child that exits first, or
 * prints no match within `ms` (default 120 s; it is killed then), fails with `what` and its output.
 */
export async function spawnUntil(
  argv: readonly string[],
  env: Record<string, string>,
  pattern: RegExp,
  o: { what: string; ms?: number; onOutput?: (text: string) => void },
): Promise<{ proc: ChildProcess; match: RegExpExecArray; output(): string }> {
  const [program, ...args] = argv;
  if (!program) throw new Error("spawnUntil: empty argv");
  const proc = spawn(program, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const take = (d: string) => {
    out += d;
    o.onOutput?.(d);
  };
  proc.stdout?.setEncoding("utf8").on("data", take);
  proc.stderr?.setEncoding("utf8").on("data", take);
  const deadline = Date.now() + (o.ms ?? 120_000);
  for (;;) {
    const match = pattern.exec(out);
    if (match) return { proc, match, output: () => out };
    if (proc.exitCode !== null || proc.signalCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`${o.what}:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Sends `signal` to a child that is still running and waits for it to exit (idempotent). */
export async function stopChildProcess(proc: ChildProcess | null, signal: NodeJS.Signals): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once("exit", r));
  proc.kill(signal);
  await exited;
}

/**
 * Runs the sandtree CLI as a child process against a test server; async, since the server shares
 * this event loop. `stdin`, when given, is piped in and closed; otherwise stdin is /dev/null.
 */
export function runCli(
  server: { url: string; key: string },
  args: string[],
  opts: { stdin?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI_MAIN, ...args], {
      env: { ...process.env, SANDTREE_API_URL: server.url, SANDTREE_API_KEY: server.key },
      stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (opts.stdin !== undefined) child.stdin?.end(opts.stdin);
  });
}
