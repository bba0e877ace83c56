/**
 * A fake internet for the sandbox-networking tests, made of two network namespaces this module
 * creates (and deletes) itself; nothing here touches a real outside address.
 *
 *   host ns  sth-<rand6>                         internet ns  sti-<rand6>
 *   lo up                                        lo up
 *   vh-<rand6> 198.51.100.1/24  <--- veth --->   vi-<rand6> 198.51.100.254/24
 *   default via 198.51.100.254                   lo also holds 203.0.113.10/20/30/40 and 198.51.100.53
 *
 * (The server addresses sit on the internet namespace's `lo` rather than a dummy interface: some
 * kernels, this repo's CI VM among them, are built without the dummy driver. Locally delivered
 * either way.)
 *
 * The sandtree server under test runs in the host namespace (`spawnInHost`); processes started
 * there resolve through the fake DNS server (`/etc/netns/<hostNs>/resolv.conf`, which
 * `ip netns exec` mounts over /etc/resolv.conf). One Node process in the internet namespace
 * (fake-internet-server.mjs) serves DNS on 198.51.100.53:53 (UDP + TCP), HTTP on port 80 and a
 * UDP + TCP echo on port 7 of each 203.0.113.x address, and logs every query and hit.
 *
 * Every command is run with execFile/spawn and an argument vector: no shell.
 */
import { type ChildProcess, execFile, execFileSync, type SpawnOptions, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { pidAlive } from "@sandtree/host";

export const HOST_ADDRESS = "198.51.100.1";
export const GATEWAY_ADDRESS = "198.51.100.254";
export const DNS_ADDRESS = "198.51.100.53";
export const SERVER_ADDRESSES = ["203.0.113.10", "203.0.113.20", "203.0.113.30", "203.0.113.40"] as const;

/** The DNS table a fresh fake internet starts with (name -> A records). */
export const INITIAL_DNS: Readonly<Record<string, readonly string[]>> = {
  "allowed.test": ["203.0.113.10"],
  "other.test": ["203.0.113.20"],
  "api.wild.test": ["203.0.113.30"],
  "deep.api.wild.test": ["203.0.113.30"],
  "denied.test": ["203.0.113.40"],
};

const SERVER_SCRIPT = fileURLToPath(new URL("./fake-internet-server.mjs", import.meta.url));
/** Owner markers, so a later run can remove namespaces a killed test process left behind. */
const MARKER_DIR = "/tmp/sandtree-fake-internet";

export interface FakeInternetOptions {
  /** Initial DNS table; replaces INITIAL_DNS. */
  dns?: Record<string, readonly string[]>;
  /** HTTP ports on each server address (default [80]). */
  httpPorts?: number[];
  /** UDP + TCP echo port on each server address (default 7). */
  echoPort?: number;
  /** TTL of DNS answers, seconds (default 5). */
  ttl?: number;
  /** Write /etc/netns/<hostNs>/resolv.conf -> 198.51.100.53 (default true). */
  resolvConf?: boolean;
  /**
   * Set net.ipv4.ip_forward=1 in the host namespace (default false: forwarding off, so the
   * server under test must turn it on itself, as it would on a real host).
   */
  hostForwarding?: boolean;
  /** How long to wait for the internet's servers to listen (default 10 s). */
  startTimeoutMs?: number;
}

export type FakeInternetLogEntry =
  | {
      kind: "dns";
      time: number;
      proto: "udp" | "tcp";
      /** Lower-case, no trailing dot. */
      name: string;
      /** "A", "AAAA", "ANY", ... or the number. */
      type: string;
      rcode: "NOERROR" | "NXDOMAIN" | "FORMERR" | "NOTIMP" | string;
      answers: string[];
      /** "ip:port" the query came from (198.51.100.1:... for anything from the host namespace). */
      source: string;
    }
  | { kind: "http"; time: number; local: string; source: string; method: string; path: string; host: string | null }
  | { kind: "udp"; time: number; local: string; source: string; payload: string }
  | { kind: "tcp"; time: number; local: string; source: string }
  | { kind: "error"; time: number; where: string; error: string };

export interface ExecResult {
  /** Exit status; null when killed by a signal (a timeout included). */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface ExecOptions {
  /** Kill the command after this long (default 10 s). */
  timeoutMs?: number;
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  env?: NodeJS.ProcessEnv;
}

export interface HostService {
  address: string;
  port: number;
  /** One entry per request served. */
  hits: { source: string; method: string; path: string; time: number }[];
  close(): Promise<void>;
}

export interface FakeInternet {
  hostNs: string;
  inetNs: string;
  /** The veth end in the host namespace (its uplink) and the one in the internet namespace. */
  hostIf: string;
  inetIf: string;
  hostAddress: string;
  gatewayAddress: string;
  dnsAddress: string;
  serverAddresses: readonly string[];
  /** Sets (replaces) a name's A records; [] makes it exist with no records (NOERROR, no answer). */
  setDns(name: string, addresses: readonly string[]): Promise<void>;
  /** Removes a name: it answers NXDOMAIN again. */
  removeDns(name: string): Promise<boolean>;
  dnsTable(): Promise<Record<string, string[]>>;
  /** Everything the internet saw since the start or the last clearLog(), in arrival order. */
  log(): Promise<FakeInternetLogEntry[]>;
  clearLog(): Promise<void>;
  /** Polls log() until pred matches an entry; throws after timeoutMs (default 5 s). */
  waitForLog(pred: (e: FakeInternetLogEntry) => boolean, timeoutMs?: number): Promise<FakeInternetLogEntry>;
  /** Runs a command in the host namespace to completion; never throws for a failed command. */
  execInHost(cmd: string, args?: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  /** The same in the internet namespace. */
  execInInet(cmd: string, args?: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  /** Starts a long-running command in the host namespace; close() kills it (SIGTERM, then SIGKILL). */
  spawnInHost(cmd: string, args?: readonly string[], opts?: SpawnOptions): ChildProcess;
  /**
   * An HTTP server in the HOST namespace answering every request with `host-secret`: the host's
   * own service a sandbox must not reach, or a tunnel target. Port 0 picks a free port.
   */
  startHostService(port: number, bindAddress?: string): Promise<HostService>;
  /** Kills every child and process left in both namespaces and deletes them. Idempotent. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------- availability

let unavailable: string | null | undefined;

/** Why these tests cannot run here (not root, no `ip netns`), or null when they can. */
export function fakeInternetUnavailableReason(): string | null {
  if (unavailable !== undefined) return unavailable;
  unavailable = null;
  if (process.platform !== "linux") unavailable = "network namespaces need Linux";
  else if (process.getuid?.() !== 0) unavailable = "creating network namespaces needs root";
  else {
    const probe = `stp-${randomBytes(3).toString("hex")}`;
    try {
      execFileSync("ip", ["netns", "add", probe], { stdio: "pipe" });
    } catch (err) {
      unavailable = `\`ip netns add\` failed: ${String((err as { stderr?: unknown }).stderr ?? err).trim()}`;
    }
    try {
      execFileSync("ip", ["netns", "del", probe], { stdio: "pipe" });
    } catch {}
  }
  return unavailable;
}

// ---------------------------------------------------------------- commands

function ip(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("ip", args, { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(" ")}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

function execIn(ns: string, cmd: string, args: readonly string[], opts: ExecOptions): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn("ip", ["netns", "exec", ns, cmd, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
      ...(opts.env ? { env: opts.env } : {}),
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.stdin.on("error", () => {});
    child.stdin.end(opts.input ?? "");
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs ?? 10_000);
    child.on("error", (err) => {
      stderr += String(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

function nsPids(ns: string): number[] {
  try {
    return execFileSync("ip", ["netns", "pids", ns], { stdio: "pipe", encoding: "utf8" })
      .split(/\s+/)
      .filter((s) => /^\d+$/.test(s))
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return [];
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {}
}

/** Synchronous teardown of one pair of namespaces (exit handlers, stale leftovers). */
function destroyNamespacesSync(namespaces: readonly string[]): void {
  for (const ns of namespaces) for (const pid of nsPids(ns)) killQuietly(pid, "SIGKILL");
  for (const ns of namespaces) {
    try {
      execFileSync("ip", ["netns", "del", ns], { stdio: "pipe" });
    } catch {}
    rmSync(path.join("/etc/netns", ns), { recursive: true, force: true });
  }
}

/** Removes the shared directories once empty (another run may still be using them). */
function tidyDirs(): void {
  for (const dir of ["/etc/netns", MARKER_DIR]) {
    try {
      rmdirSync(dir);
    } catch {}
  }
}

/** Removes the namespaces of fake internets whose owning process is gone (a killed test run). */
function sweepStale(): void {
  let names: string[];
  try {
    names = readdirSync(MARKER_DIR);
  } catch {
    return;
  }
  for (const f of names) {
    const file = path.join(MARKER_DIR, f);
    try {
      const m = JSON.parse(readFileSync(file, "utf8")) as { pid: number; namespaces: string[] };
      if (pidAlive(m.pid)) continue;
      destroyNamespacesSync(m.namespaces.filter((n) => /^st[hi]-[0-9a-f]{6}$/.test(n)));
    } catch {}
    rmSync(file, { force: true });
  }
  tidyDirs();
}

// ---------------------------------------------------------------- process-exit cleanup

const live = new Set<{ closeSync(): void }>();
let hooksInstalled = false;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  const closeAll = () => {
    for (const inst of [...live]) inst.closeSync();
  };
  process.on("exit", closeAll);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = () => {
      closeAll();
      // Keep the default behaviour (die of the signal) unless someone else handles it.
      if (process.listenerCount(sig) === 1) {
        process.off(sig, onSignal);
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, onSignal);
  }
}

// ---------------------------------------------------------------- the fake internet

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Reads newline-delimited JSON from a child's stdout. */
function onJsonLines(child: ChildProcess, fn: (msg: any) => void): void {
  let buf = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() === "") continue;
      try {
        fn(JSON.parse(line));
      } catch {}
    }
  });
}

const HOST_SERVICE_SCRIPT = `
const http = require("node:http");
const [port, host] = process.argv.slice(1);
const server = http.createServer((req, res) => {
  process.stdout.write(JSON.stringify({ hit: { source: req.socket.remoteAddress + ":" + req.socket.remotePort, method: req.method, path: req.url, time: Date.now() } }) + "\\n");
  req.resume();
  res.writeHead(200, { "content-type": "text/plain", connection: "close" });
  res.end("host-secret");
});
server.on("error", (err) => { process.stdout.write(JSON.stringify({ ready: false, error: String(err) }) + "\\n"); process.exit(1); });
server.listen(Number(port), host, () => process.stdout.write(JSON.stringify({ ready: true, port: server.address().port }) + "\\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

export async function createFakeInternet(opts: FakeInternetOptions = {}): Promise<FakeInternet> {
  const reason = fakeInternetUnavailableReason();
  if (reason !== null) throw new Error(`fake internet unavailable: ${reason}`);
  sweepStale();
  installExitHooks();

  const rand = randomBytes(3).toString("hex");
  const hostNs = `sth-${rand}`;
  const inetNs = `sti-${rand}`;
  const hostIf = `vh-${rand}`;
  const inetIf = `vi-${rand}`;
  const markerFile = path.join(MARKER_DIR, `${rand}.json`);
  const children = new Set<ChildProcess>();
  let server: ChildProcess | undefined;
  let closing: Promise<void> | undefined;
  const created: string[] = [];

  const inst = {
    closeSync() {
      live.delete(inst);
      for (const c of children) c.kill("SIGKILL");
      destroyNamespacesSync(created);
      rmSync(markerFile, { force: true });
      tidyDirs();
    },
  };
  live.add(inst);

  async function close(): Promise<void> {
    closing ??= (async () => {
      // Children first (SIGTERM, so the server under test may clean up; then SIGKILL), then any
      // process still inside the namespaces (their descendants), then the namespaces themselves:
      // a namespace with no process and no mount left is freed with its interfaces.
      server?.stdin?.end();
      const kids = [...children];
      for (const c of kids) if (c !== server) c.kill("SIGTERM");
      const exited = await Promise.all(kids.map((c) => waitExit(c, 2_000)));
      kids.forEach((c, i) => {
        if (!exited[i]) c.kill("SIGKILL");
      });
      await Promise.all(kids.map((c) => waitExit(c, 2_000)));
      for (let attempt = 0; attempt < 20; attempt++) {
        const pids = created.flatMap(nsPids);
        if (pids.length === 0) break;
        for (const pid of pids) killQuietly(pid, attempt === 0 ? "SIGTERM" : "SIGKILL");
        await new Promise((r) => setTimeout(r, 100));
      }
      inst.closeSync();
    })();
    return closing;
  }

  try {
    for (let attempt = 0; ; attempt++) {
      try {
        mkdirSync(MARKER_DIR, { recursive: true });
        writeFileSync(markerFile, JSON.stringify({ pid: process.pid, namespaces: [hostNs, inetNs] }));
        break;
      } catch (err) {
        if (attempt > 0) throw err;
      }
    }
    await ip(["netns", "add", hostNs]);
    created.push(hostNs);
    await ip(["netns", "add", inetNs]);
    created.push(inetNs);
    // The veth pair is created inside the namespaces: it never appears in the caller's.
    await ip(["-n", hostNs, "link", "add", hostIf, "type", "veth", "peer", "name", inetIf, "netns", inetNs]);
    for (const [ns, dev] of [
      [hostNs, "lo"],
      [hostNs, hostIf],
      [inetNs, "lo"],
      [inetNs, inetIf],
    ] as const) {
      await ip(["-n", ns, "link", "set", dev, "up"]);
    }
    await ip(["-n", hostNs, "addr", "add", `${HOST_ADDRESS}/24`, "dev", hostIf]);
    await ip(["-n", hostNs, "route", "add", "default", "via", GATEWAY_ADDRESS, "dev", hostIf]);
    await ip(["-n", inetNs, "addr", "add", `${GATEWAY_ADDRESS}/24`, "dev", inetIf]);
    for (const a of [...SERVER_ADDRESSES, DNS_ADDRESS]) await ip(["-n", inetNs, "addr", "add", `${a}/32`, "dev", "lo"]);
    // Set either way: a new namespace inherits the initial namespace's IPv4 settings
    // (net.core.devconf_inherit_init_net=0), so it starts with forwarding on wherever the host has it on.
    await ip(["netns", "exec", hostNs, "sysctl", "-qw", `net.ipv4.ip_forward=${opts.hostForwarding ? 1 : 0}`]);
    if (opts.resolvConf ?? true) {
      const dir = path.join("/etc/netns", hostNs);
      // Retried once: a concurrent close() may remove /etc/netns when it finds it empty.
      for (let attempt = 0; ; attempt++) {
        try {
          mkdirSync(dir, { recursive: true });
          writeFileSync(path.join(dir, "resolv.conf"), `nameserver ${DNS_ADDRESS}\noptions timeout:2 attempts:2\n`);
          break;
        } catch (err) {
          if (attempt > 0) throw err;
        }
      }
    }

    const config = {
      dnsAddress: DNS_ADDRESS,
      serverAddresses: SERVER_ADDRESSES,
      httpPorts: opts.httpPorts ?? [80],
      echoPort: opts.echoPort ?? 7,
      ttl: opts.ttl ?? 5,
      dns: opts.dns ?? INITIAL_DNS,
    };
    const child = spawn("ip", ["netns", "exec", inetNs, process.execPath, SERVER_SCRIPT, JSON.stringify(config)], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    server = child;
    children.add(child);
    child.on("exit", () => children.delete(child));
    child.stdin.on("error", () => {});
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr = (stderr + d).slice(-4000);
    });

    let nextId = 1;
    const pending = new Map<number, { resolve(v: any): void; reject(e: Error): void }>();
    let ready: ((v: { ready: boolean; error?: string }) => void) | undefined;
    const readyP = new Promise<{ ready: boolean; error?: string }>((r) => (ready = r));
    onJsonLines(child, (msg) => {
      if (typeof msg.ready === "boolean") ready?.(msg);
      else if (typeof msg.id === "number") {
        const p = pending.get(msg.id);
        pending.delete(msg.id);
        if (msg.ok) p?.resolve(msg);
        else p?.reject(new Error(`fake internet: ${msg.error}`));
      }
    });
    child.on("exit", (code, signal) => {
      ready?.({ ready: false, error: `exited ${code ?? signal}: ${stderr.trim()}` });
      for (const p of pending.values()) p.reject(new Error(`fake internet server exited ${code ?? signal}: ${stderr.trim()}`));
      pending.clear();
    });
    const timeoutMs = opts.startTimeoutMs ?? 10_000;
    const started = await Promise.race([
      readyP,
      new Promise<{ ready: boolean; error?: string }>((r) =>
        setTimeout(() => r({ ready: false, error: `not listening after ${timeoutMs} ms: ${stderr.trim()}` }), timeoutMs),
      ),
    ]);
    if (!started.ready) throw new Error(`fake internet server failed: ${started.error}`);

    const request = (req: Record<string, unknown>): Promise<any> => {
      if (closing) return Promise.reject(new Error("fake internet closed"));
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.stdin.write(JSON.stringify({ ...req, id }) + "\n");
      });
    };

    const spawnInHost: FakeInternet["spawnInHost"] = (cmd, args = [], spawnOpts = {}) => {
      if (closing) throw new Error("fake internet closed");
      const c = spawn("ip", ["netns", "exec", hostNs, cmd, ...args], spawnOpts);
      children.add(c);
      c.on("exit", () => children.delete(c));
      c.on("error", () => children.delete(c));
      return c;
    };

    const net: FakeInternet = {
      hostNs,
      inetNs,
      hostIf,
      inetIf,
      hostAddress: HOST_ADDRESS,
      gatewayAddress: GATEWAY_ADDRESS,
      dnsAddress: DNS_ADDRESS,
      serverAddresses: SERVER_ADDRESSES,
      async setDns(name, addresses) {
        await request({ op: "setDns", name, addresses: [...addresses] });
      },
      async removeDns(name) {
        return (await request({ op: "removeDns", name })).removed as boolean;
      },
      async dnsTable() {
        return (await request({ op: "dns" })).table as Record<string, string[]>;
      },
      async log() {
        return (await request({ op: "log" })).log as FakeInternetLogEntry[];
      },
      async clearLog() {
        await request({ op: "clearLog" });
      },
      async waitForLog(pred, ms = 5_000) {
        const deadline = Date.now() + ms;
        for (;;) {
          const hit = (await net.log()).find(pred);
          if (hit) return hit;
          if (Date.now() > deadline) throw new Error(`fake internet: no matching log entry after ${ms} ms`);
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      execInHost: (cmd, args = [], o = {}) => execIn(hostNs, cmd, args, o),
      execInInet: (cmd, args = [], o = {}) => execIn(inetNs, cmd, args, o),
      spawnInHost,
      async startHostService(port, bindAddress = "127.0.0.1") {
        const c = spawnInHost(process.execPath, ["-e", HOST_SERVICE_SCRIPT, String(port), bindAddress], {
          stdio: ["pipe", "pipe", "pipe"],
        });
        c.stdin?.on("error", () => {});
        let err = "";
        c.stderr?.setEncoding("utf8").on("data", (d: string) => (err = (err + d).slice(-2000)));
        const hits: HostService["hits"] = [];
        const boundPort = await new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`host service ${bindAddress}:${port} did not start: ${err}`)), 10_000);
          onJsonLines(c, (msg) => {
            if (msg.hit) hits.push(msg.hit);
            else if (msg.ready === true) {
              clearTimeout(timer);
              resolve(msg.port as number);
            } else if (msg.ready === false) {
              clearTimeout(timer);
              reject(new Error(`host service ${bindAddress}:${port}: ${msg.error}`));
            }
          });
          c.on("exit", (code) => {
            clearTimeout(timer);
            reject(new Error(`host service ${bindAddress}:${port} exited ${code}: ${err}`));
          });
        }).catch((e: unknown) => {
          c.kill("SIGKILL");
          throw e;
        });
        return {
          address: bindAddress,
          port: boundPort,
          hits,
          async close() {
            c.stdin?.end();
            if (!(await waitExit(c, 2_000))) c.kill("SIGKILL");
            await waitExit(c, 2_000);
          },
        };
      },
      close,
    };
    return net;
  } catch (err) {
    await close();
    throw err;
  }
}
