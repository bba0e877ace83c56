// Network namespaces for fleet tests (as root): one per worker, each joined to this namespace by a
// veth pair the test names and addresses itself, in 198.18.0.0/15 (the range set aside for
// network tests). Commands run with argv arrays, never a shell. Everything made here is removed
// by name (and the processes inside by PID) in destroy(), idempotently, and on process exit.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";

export interface WorkerNet {
  /** The namespace's name (`ip netns exec NAME ...`). */
  ns: string;
  /** This namespace's end of the veth pair (on the host). */
  hostIf: string;
  /** The host end's address: where processes in the namespace reach this namespace. */
  hostAddress: string;
  /** The address inside the namespace (where its worker listens). */
  address: string;
}

export interface FleetNets {
  nets: WorkerNet[];
  /** Kills what still runs inside the namespaces (by PID), deletes them and their veths; idempotent. */
  destroy(): void;
}

function ip(args: string[]): string {
  return execFileSync("ip", args, { encoding: "utf8", stdio: "pipe" });
}

function quietly(fn: () => unknown): void {
  try {
    fn();
  } catch {}
}

/** PIDs of the processes in a namespace (`ip netns pids`), none when it is gone. */
export function pidsIn(ns: string): number[] {
  try {
    return ip(["netns", "pids", ns])
      .split(/\s+/)
      .filter((s) => /^\d+$/.test(s))
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * `count` namespaces `stf-<rand>-<i>`, each with a veth pair: `stf<rand>h<i>` here with
 * 198.18.<n>.1/24, its peer inside with 198.18.<n>.2/24 and a default route through it. Every
 * namespace also reaches the other host-end addresses (the host delivers to any of its addresses).
 */
export function createFleetNets(count: number): FleetNets {
  if (process.getuid?.() !== 0) throw new Error("network namespaces need root (ip netns add): run this test as root");
  const tag = randomBytes(3).toString("hex");
  // A random /24 block per run, so two runs at once do not collide.
  const base = 1 + (randomBytes(1)[0] ?? 0) * 2;
  const nets: WorkerNet[] = [];
  const made: Array<{ ns: string; hostIf: string }> = [];
  let destroyed = false;
  const destroy = () => {
    if (destroyed) return;
    destroyed = true;
    process.off("exit", destroy);
    for (const { ns, hostIf } of made) {
      for (const pid of pidsIn(ns)) quietly(() => process.kill(pid, "SIGKILL"));
      quietly(() => ip(["link", "del", hostIf]));
      quietly(() => ip(["netns", "del", ns]));
    }
  };
  process.on("exit", destroy);
  try {
    for (let i = 0; i < count; i++) {
      const n = ((base + i) % 254) + 1;
      const ns = `stf-${tag}-${i}`;
      const hostIf = `stf${tag}h${i}`;
      const nsIf = `stf${tag}w${i}`;
      const net = { ns, hostIf, hostAddress: `198.18.${n}.1`, address: `198.18.${n}.2` };
      ip(["netns", "add", ns]);
      made.push({ ns, hostIf });
      ip(["link", "add", hostIf, "type", "veth", "peer", "name", nsIf]);
      ip(["link", "set", nsIf, "netns", ns]);
      ip(["addr", "add", `${net.hostAddress}/24`, "dev", hostIf]);
      ip(["link", "set", hostIf, "up"]);
      ip(["-n", ns, "link", "set", "lo", "up"]);
      ip(["-n", ns, "addr", "add", `${net.address}/24`, "dev", nsIf]);
      ip(["-n", ns, "link", "set", nsIf, "up"]);
      ip(["-n", ns, "route", "add", "default", "via", net.hostAddress]);
      nets.push(net);
    }
  } catch (err) {
    destroy();
    throw err;
  }
  return { nets, destroy };
}
