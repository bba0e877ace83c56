import { existsSync, readdirSync } from "node:fs";
import { SandtreeError } from "@sandtree/protocol";
import { runCommand } from "../util/run-command.js";

/**
 * A sandbox's network rate, each direction, on its tap. Traffic to the guest leaves the host
 * through the tap: a token bucket (tbf) is the tap's root qdisc. Traffic from the guest enters
 * through it: the tap's ingress redirects every packet to an ifb device of its own whose root is
 * the same bucket (shaping, so the guest's TCP slows down instead of losing packets; and the
 * kernels here have no `police` action). Every call is idempotent (`replace`).
 */

/** The ifb device paired with a tap: `st…` becomes `si…` (same length, within IFNAMSIZ). */
export function ifbNameOf(tap: string): string {
  return tap.startsWith("st") ? `si${tap.slice(2)}` : `si${tap}`.slice(0, 15);
}

/** A bucket deep enough for the rate (20 ms of traffic) and never below 64 KiB. */
function burstBytes(mbit: number): number {
  return Math.max(64 * 1024, Math.ceil((mbit * 1_000_000) / 8 / 50));
}

/** The `ip`/`tc` argv lists that put `mbit` on `tap` (pure: tests read them). */
export function tapRateCommands(tap: string, mbit: number, ifbExists: boolean): string[][] {
  const ifb = ifbNameOf(tap);
  const tbf = (dev: string) => [
    "tc",
    "qdisc",
    "replace",
    "dev",
    dev,
    "root",
    "tbf",
    "rate",
    `${mbit}mbit`,
    "burst",
    `${burstBytes(mbit)}b`,
    "latency",
    "50ms",
  ];
  // The ifb first (applyTapRate runs the `ip` lines, then the `tc` lines, each in one process).
  return [
    ...(ifbExists ? [] : [["ip", "link", "add", ifb, "type", "ifb"]]),
    ["ip", "link", "set", ifb, "up"],
    tbf(tap),
    tbf(ifb),
    ["tc", "qdisc", "replace", "dev", tap, "handle", "ffff:", "ingress"],
    [
      "tc",
      "filter",
      "replace",
      "dev",
      tap,
      "parent",
      "ffff:",
      "prio",
      "1",
      "handle",
      "800::800",
      "protocol",
      "all",
      "u32",
      "match",
      "u32",
      "0",
      "0",
      "action",
      "mirred",
      "egress",
      "redirect",
      "dev",
      ifb,
    ],
  ];
}

export interface TapRateOptions {
  /** The `tc` binary (tests point it at a missing one). */
  tc?: string;
  signal?: AbortSignal;
}

/** Refuses clearly when `tc` cannot run: a rate that is asked for is never silently dropped. */
export async function checkTc(tc = "tc"): Promise<void> {
  try {
    await runCommand([tc, "-V"]);
  } catch (err) {
    throw new SandtreeError(
      "NOT_SUPPORTED",
      `per-sandbox network rate limits need \`tc\` (iproute2), which did not run: ${(err as Error).message}`,
      { tool: tc },
      { cause: err },
    );
  }
}

interface PendingRate {
  tap: string;
  mbit: number;
  tc: string;
  done: (err: unknown) => void;
}
let rateQueue: Promise<unknown> = Promise.resolve();
let pendingRates: PendingRate[] = [];

/** The `ip` lines, then the `tc` lines, of these rates, each tool's in one process (ifbs looked up now). */
async function runRates(tc: string, rates: PendingRate[]): Promise<void> {
  const cmds = rates.flatMap((r) => tapRateCommands(r.tap, r.mbit, existsSync(`/sys/class/net/${ifbNameOf(r.tap)}`)));
  for (const tool of ["ip", "tc"] as const) {
    const lines = cmds.filter((c) => c[0] === tool).map((c) => c.slice(1).join(" "));
    if (lines.length) await runCommand([tool === "tc" ? tc : tool, "-batch", "-"], { input: `${lines.join("\n")}\n` });
  }
}

/** Runs the rates waiting now, one `ip -batch` and one `tc -batch` for all; each alone if that failed. */
async function flushRates(): Promise<void> {
  const batch = pendingRates;
  pendingRates = [];
  for (const tc of new Set(batch.map((r) => r.tc))) {
    const group = batch.filter((r) => r.tc === tc);
    try {
      await runRates(tc, group);
      for (const r of group) r.done(null);
    } catch (err) {
      if (group.length === 1) (group[0] as PendingRate).done(err);
      else for (const r of group) await runRates(tc, [r]).then(() => r.done(null), r.done);
    }
  }
}

/**
 * Puts the rate on the tap (before its VM starts) and the ifb beside it: the `ip` lines in one
 * `ip -batch`, then the `tc` lines in one `tc -batch` (each stops at its first failing line and
 * exits non-zero). Rates asked for while one is applied wait and go together: the children of
 * one fork, starting at once, take two processes between them, not two each. Should a joint run
 * fail, each runs again alone, so only the one whose line failed fails. A caller aborted while
 * it waits is dropped (its lines never run).
 */
export function applyTapRate(tap: string, mbit: number, opts: TapRateOptions = {}): Promise<void> {
  const { signal } = opts;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const rate: PendingRate = {
      tap,
      mbit,
      tc: opts.tc ?? "tc",
      done: (err) => {
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve();
      },
    };
    function onAbort() {
      const i = pendingRates.indexOf(rate);
      if (i < 0) return; // already running: it ends as its processes do
      pendingRates.splice(i, 1);
      rate.done(signal?.reason);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    pendingRates.push(rate);
    if (pendingRates.length > 1) return;
    const run = rateQueue.then(flushRates);
    rateQueue = run.catch(() => {});
  });
}

/** Deletes the tap's ifb (the tap's own qdiscs go with the tap). Idempotent. */
export async function removeTapRate(tap: string): Promise<void> {
  const ifb = ifbNameOf(tap);
  if (existsSync(`/sys/class/net/${ifb}`)) await runCommand(["ip", "link", "del", ifb]).catch(() => {});
}

/** Deletes the ifbs (named `<prefix>…`, see ifbNameOf) whose tap is gone: an earlier server's leftovers. */
export async function sweepTapRates(tapPrefix = "st"): Promise<string[]> {
  const removed: string[] = [];
  let links: string[] = [];
  try {
    links = readdirSync("/sys/class/net");
  } catch {
    return removed;
  }
  const ifbPrefix = ifbNameOf(tapPrefix);
  for (const link of links) {
    if (!link.startsWith(ifbPrefix) || !existsSync(`/sys/class/net/${link}/ifindex`)) continue;
    const tap = `st${link.slice(2)}`;
    if (links.includes(tap)) continue;
    // An ifb without its tap: only ours are named so (checked by type before deleting).
    if (!existsSync(`/sys/class/net/${link}/tun_flags`) && !existsSync(`/sys/class/net/${link}/bridge`)) {
      await runCommand(["ip", "link", "del", link]).catch(() => {});
      removed.push(link);
    }
  }
  return removed;
}
