// Types of netns-api.mjs (a sandtree server in another network namespace, reached from this one).
import type { ChildProcess, SpawnOptions } from "node:child_process";
import type net from "node:net";

/**
 * The command and argv that run the built CLI's `serve` on `dataDir` and `port` of 127.0.0.1 in
 * a network namespace, wrapped by withHostCgroups (host-cgroups.mjs) so it can give VMs cgroups.
 */
export function serveArgv(dataDir: string, port: number): [string, string[]];

/**
 * Reaches the API a server serves on `port` of another namespace's loopback: a process there
 * (`spawnThere` runs an argv in that namespace) bridges a Unix socket in `dataDir` (visible from
 * every namespace) to the port, and `listener`, on this namespace's loopback, forwards to the
 * socket. `base` is its URL; close the listener when done (or unref it).
 */
export function bridgeApi(
  spawnThere: (cmd: string, argv: string[], opts: SpawnOptions) => ChildProcess,
  dataDir: string,
  port: number,
): Promise<{ base: string; listener: net.Server }>;

/**
 * Waits (every 100 ms, 60 s at most) until the server of `dataDir` wrote its first API key
 * (credentials.env) and answers /healthz at `base`; answers the key. Throws past the bound.
 */
export function waitForApi(base: string, dataDir: string): Promise<string>;
