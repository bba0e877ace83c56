// The real-process fleet harness: `sandtree worker` children on loopback, each with its own data
// dir, and what their own stores hold. Shared by the fleet-worker*.test.ts files.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { qemuPidsNamed } from "@sandtree/host/qemu";
import Database from "better-sqlite3";
import { afterAll, beforeAll, expect } from "vitest";
import { type Api, jsonApi, spawnServe, spawnUntil, stopChildProcess } from "../helpers.js";
import { withHostCgroups } from "../host-cgroups.js";

export const CLI_MAIN = path.resolve(import.meta.dirname, "../../../cli/dist/main.js");
// No sandbox networks (many servers share this network namespace), no background template builds.
export const ENV = { SANDTREE_NETWORK: "off", SANDTREE_LOG_LEVEL: "warn", SANDTREE_WARM_TEMPLATES: "false" };
export const SMALL = { image: "sandtree/busybox", memory_gb: 0.125, disk_size_gb: 1 };
export const ENDED = ["ERROR", "TERMINATED", "TIMEOUT"];
/** What a worker prints once it joined, with the URL it serves sandboxes at. */
const JOINED = /sandboxes served at (http:\/\/[\d.:]+)/;

export interface Worker {
  name: string;
  dir: string;
  proc: ChildProcess;
  url: string;
  /** Everything it printed so far. */
  output(): string;
}

/** `sandtree worker` as a child (with `extra` flags); resolves once it printed that it joined. */
export async function startWorker(
  cpUrl: string,
  token: string,
  name: string,
  dir: string,
  extra: string[] = [],
): Promise<Worker> {
  const args = [
    "worker",
    "--join",
    cpUrl,
    "--join-token",
    token,
    "--name",
    name,
    "--data-dir",
    dir,
    "--listen",
    "127.0.0.1:0",
    ...extra,
  ];
  const { proc, match, output } = await spawnUntil([process.execPath, CLI_MAIN, ...args], ENV, JOINED, {
    what: `worker ${name} did not join`,
  });
  return { name, dir, proc, url: match[1] ?? "", output };
}

/** The sandbox ids in a worker's own store (its SQLite in its data dir). */
export function idsOnWorker(w: Worker): string[] {
  const db = new Database(path.join(w.dir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT id FROM sandboxes").all() as Array<{ id: string }>).map((r) => r.id);
  } finally {
    db.close();
  }
}

/** PIDs of the QEMU processes that run a sandbox's VM (named `sandtree-<id>`), found in /proc. */
export function qemuPidsOf(sandboxId: string): number[] {
  return qemuPidsNamed(`sandtree-${sandboxId}`);
}

export interface ControlPlane {
  dir: string;
  proc: ChildProcess;
  url: string;
  /** The admin key it printed at first start ("" when the database already had one). */
  key: string;
  /** Its own host's name (`local-<id>` on PostgreSQL). */
  hostName(): string;
  output(): string;
}

/** `sandtree serve` as a child with extra flags (listen address, database, blob store); resolves once it listens. */
export async function startControlPlane(
  dir: string,
  o: { listen: string; args?: string[]; env?: Record<string, string> },
): Promise<ControlPlane> {
  const args = ["serve", "--data-dir", dir, "--host", o.listen, "--port", "0", ...(o.args ?? [])];
  const { proc, match, output } = await spawnUntil(
    [process.execPath, CLI_MAIN, ...args],
    { ...ENV, ...o.env },
    /(?:SANDTREE_API_URL=|listening on )(http:\/\/[\d.:]+)/,
    { what: "control plane did not start" },
  );
  const key = /SANDTREE_API_KEY=(\S+)/.exec(output())?.[1] ?? "";
  const hostName = () => readFileSync(path.join(dir, "local-host-name"), "utf8").trim();
  return { dir, proc, url: match[1] ?? "", key, hostName, output };
}

/**
 * `sandtree worker` as a child inside a network namespace (`ip netns exec` execs, so the PID held
 * is the worker's own), joined to every URL of `joinUrls`, listening on `listen`; extra flags in `args`.
 */
export async function startWorkerIn(
  ns: string,
  o: {
    joinUrls: string[];
    token: string;
    name: string;
    dir: string;
    listen: string;
    args?: string[];
    /** More environment (the object store's AWS_* credentials). */
    env?: Record<string, string>;
  },
): Promise<Worker> {
  const args = ["worker", "--join", o.joinUrls.join(","), "--join-token", o.token, "--name", o.name];
  args.push("--data-dir", o.dir, "--listen", o.listen, ...(o.args ?? []));
  // A worker gives each VM its cgroup: the namespace's fresh /sys gets the host's hierarchies.
  const [cmd, argv] = withHostCgroups(process.execPath, [CLI_MAIN, ...args]);
  const { proc, match, output } = await spawnUntil(["ip", "netns", "exec", ns, cmd, ...argv], { ...ENV, ...o.env }, JOINED, {
    what: `worker ${o.name} did not join`,
  });
  return { name: o.name, dir: o.dir, proc, url: match[1] ?? "", output };
}

/** A checkpoint's row in the store of the server (control plane or worker) whose data dir is `dir`. */
export function checkpointRowIn(
  dir: string,
  id: string,
): { id: string; state: string; blob_key: string | null; sha256: string | null; parent_id: string | null } | undefined {
  const db = new Database(path.join(dir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return db.prepare("SELECT id, state, blob_key, sha256, parent_id FROM checkpoints WHERE id = ?").get(id) as
      | { id: string; state: string; blob_key: string | null; sha256: string | null; parent_id: string | null }
      | undefined;
  } finally {
    db.close();
  }
}

/**
 * Reads again (every `everyMs`, default 250) until `done` holds, and returns what it read; past a
 * generous deadline (`ms`, default 300 s) it fails naming `what` and the last value: no timing assertion.
 */
export async function until<T>(
  what: string | (() => string),
  read: () => Promise<T>,
  done: (v: T) => boolean,
  o: { ms?: number; everyMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (o.ms ?? 300_000);
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`${typeof what === "string" ? what : what()}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, o.everyMs ?? 250));
  }
}

/**
 * Follows a sandbox through `api` until it is RUNNING (within `ms`, default 240 s) and returns it;
 * one that ends first fails with its status and reason, and `context()` (a worker's output) when given.
 */
export async function waitRunning(
  api: Api,
  id: string,
  o: { ms?: number; context?: () => string } = {},
): Promise<Record<string, any>> {
  const more = () => (o.context ? `\n${o.context()}` : "");
  const s = await until(
    () => `${id} still starting${more()}`,
    async () => (await api("GET", `/v1/sandboxes/${id}`)).body,
    (b) => b.status === "RUNNING" || ENDED.includes(b.status),
    { ms: o.ms ?? 240_000, everyMs: 200 },
  );
  if (s.status !== "RUNNING") throw new Error(`${id} ended ${s.status}: ${s.error_reason}${more()}`);
  return s;
}

export interface TwoWorkerFleet {
  /** The control plane's data dir, process (replace it when a test restarts it), URL and admin key. */
  dir: string;
  proc: ChildProcess;
  url: string;
  key: string;
  api: Api;
  /** Its join token (<data-dir>/join-token). */
  token: string;
  /** "wa" and "wb". */
  workers: [Worker, Worker];
  /** The control plane's environment (a restart of it takes the same). */
  env: Record<string, string>;
  /** PIDs stop() kills first: the VMs of a worker killed with SIGKILL outlive it. */
  orphans: number[];
  /** SIGKILL to the orphans, SIGTERM to the workers and the control plane, then removes every data dir. */
  stop(): Promise<void>;
}

/**
 * `sandtree serve` (SQLite, `env` added to ENV) and two workers "wa" and "wb" joined to it, each in
 * a new data dir; the control plane's own host is cordoned, so every create goes to a worker. On a
 * failure part-way it stops what it started.
 */
export async function startTwoWorkerFleet(env: Record<string, string>): Promise<TwoWorkerFleet> {
  const dirs: string[] = [];
  const workers: Worker[] = [];
  let cp: ChildProcess | null = null;
  const orphans: number[] = [];
  const stop = async () => {
    for (const pid of orphans) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    for (const w of workers) await stopChildProcess(w.proc, "SIGTERM");
    await stopChildProcess(cp, "SIGTERM");
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-cp-"));
    dirs.push(dir);
    const started = await spawnServe(dir, { env });
    cp = started.proc;
    const api = jsonApi(started.url, () => started.key);
    const token = readFileSync(path.join(dir, "join-token"), "utf8").trim();
    for (const name of ["wa", "wb"]) {
      const wdir = mkdtempSync(path.join(tmpdir(), `sandtree-${name}-`));
      dirs.push(wdir);
      workers.push(await startWorker(started.url, token, name, wdir));
    }
    expect((await api("POST", "/v1/hosts/local/cordon")).status).toBe(200);
    const { url, key } = started;
    return {
      dir,
      get proc() {
        return cp as ChildProcess;
      },
      set proc(p: ChildProcess) {
        cp = p;
      },
      url,
      key,
      api,
      token,
      workers: workers as [Worker, Worker],
      env,
      orphans,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * startTwoWorkerFleet for the enclosing describe, its hosts beating every second (plus `env`'s
 * variables, read when it starts: after the describe's earlier beforeAll hooks); stopped in an
 * afterAll (the hooks of the describe registered earlier run after that). `set` hears it once up.
 */
export function twoWorkerFleetForFile(
  env: () => Record<string, string>,
  set: (fleet: TwoWorkerFleet) => void,
): () => TwoWorkerFleet {
  let fleet: TwoWorkerFleet | undefined;
  beforeAll(async () => {
    fleet = await startTwoWorkerFleet({ ...ENV, SANDTREE_HEARTBEAT_INTERVAL_MS: "1000", ...env() });
    set(fleet);
  }, 300_000);
  afterAll(async () => {
    // stop() kills the VMs of a worker killed with SIGKILL (fleet.orphans) first.
    await fleet?.stop();
  }, 120_000);
  return () => {
    if (!fleet) throw new Error("the file's fleet is not up yet: use it inside a test or hook");
    return fleet;
  };
}
