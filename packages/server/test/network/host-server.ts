/**
 * `sandtree serve` with sandbox networking on, run in a fake internet's host namespace
 * (fake-internet.ts). Its API listens on that namespace's loopback; tests reach it through a
 * Unix socket (visible from every namespace) bridged to that port by a process in the namespace,
 * and a loopback listener in this process in front of the socket.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { bridgeApi, serveArgv, waitForApi } from "../../../../scripts/lib/netns-api.mjs";
import { type Api, jsonApi } from "../helpers.js";
import { createFakeInternet, type FakeInternet } from "./fake-internet.js";

export interface HostServer {
  dataDir: string;
  /** The API's base URL as seen from this process. */
  base: string;
  /** The API's port on the host namespace's loopback. */
  port: number;
  /** The first API key (admin of the default team). */
  key(): string;
  api: Api;
  /** The running server process (its pid is the server's: `ip netns exec` execs it). */
  proc(): ChildProcess;
  /** Starts the server again on the same data dir and port (after a kill) and waits for it. */
  restart(): Promise<void>;
  /** Sends the signal and waits for the process to exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Runs a command in the host namespace and returns its stdout. */
  hostNs(cmd: string, ...argv: string[]): string;
  /** Closes the bridge and removes the data dir (the fake internet's close() kills the processes). */
  close(): void;
}

/**
 * A fake internet and this server in it for the enclosing describe: made in a beforeAll (before
 * the describe's own), both closed in an afterAll (the server's SIGTERM ends its sandboxes, rules
 * and taps). Read them inside tests and hooks: before they are up the getters throw.
 */
export function networkedServerForFile(
  env: Record<string, string>,
  opts: { onStdout?: (text: string) => void; startTimeoutMs?: number } = {},
): { readonly inet: FakeInternet; readonly server: HostServer } {
  let inet: FakeInternet | undefined;
  let server: HostServer | undefined;
  const { startTimeoutMs = 600_000, ...serverOpts } = opts;
  beforeAll(async () => {
    inet = await createFakeInternet();
    server = await startHostServer(inet, env, serverOpts);
  }, startTimeoutMs);
  afterAll(async () => {
    await inet?.close();
    server?.close();
  }, 120_000);
  const up = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error("the file's fake internet and server are not up yet: use them inside a test or hook");
    return v;
  };
  return {
    get inet() {
      return up(inet);
    },
    get server() {
      return up(server);
    },
  };
}

export async function startHostServer(
  inet: FakeInternet,
  env: Record<string, string>,
  opts: { onStdout?: (text: string) => void } = {},
): Promise<HostServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-net-"));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  let proc: ChildProcess;
  let key = "";

  const spawnServer = () => {
    const [cmd, argv] = serveArgv(dataDir, port);
    proc = inet.spawnInHost(cmd, argv, {
      env: { ...process.env, SANDTREE_NETWORK: "on", ...env },
      stdio: ["ignore", opts.onStdout ? "pipe" : "ignore", "ignore"],
    });
    if (opts.onStdout) proc.stdout?.setEncoding("utf8").on("data", opts.onStdout);
  };

  const { base, listener } = await bridgeApi(inet.spawnInHost, dataDir, port);
  const waitApi = async () => {
    key = await waitForApi(base, dataDir);
  };

  const api = jsonApi(base, () => key);

  spawnServer();
  await waitApi();
  return {
    dataDir,
    base,
    port,
    key: () => key,
    api,
    proc: () => proc,
    async restart() {
      spawnServer();
      await waitApi();
    },
    async kill(signal) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill(signal);
      await exited;
    },
    hostNs: (cmd, ...argv) => execFileSync("ip", ["netns", "exec", inet.hostNs, cmd, ...argv]).toString(),
    close() {
      listener.close();
      if (!process.env.KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Waits (every 200 ms, `tries` times at most) until sandbox `id` is RUNNING, failing at once when
 * it ended instead, then puts `probe` in it at /tmp/probe.py.
 */
export async function runningWithProbe(api: Api, id: string, probe: string, tries: number): Promise<void> {
  for (let i = 0; i < tries; i++) {
    const r = await api("GET", `/v1/sandboxes/${id}`);
    if (r.body.status === "RUNNING") break;
    if (["ERROR", "TERMINATED", "TIMEOUT"].includes(r.body.status)) throw new Error(`${id}: ${r.body.error_reason}`);
    await new Promise((res) => setTimeout(res, 200));
  }
  const up = await api("PUT", `/v1/sandboxes/${id}/files?path=/tmp/probe.py`, new TextEncoder().encode(probe), {
    "content-type": "application/octet-stream",
  });
  if (up.status >= 300) throw new Error(`upload failed: ${up.status} ${JSON.stringify(up.body)}`);
}
