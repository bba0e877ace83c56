import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { pidAlive } from "../util/pid-alive.js";
import { runCommand } from "../util/run-command.js";
import { intToIp, parseCidr } from "./addresses.js";

/** An IPv4 address on an interface of this host, whether the interface is up or not. */
export interface HostAddress {
  iface: string;
  address: string;
  prefix: number;
  up: boolean;
}

/**
 * Every IPv4 address of this network namespace, from `ip -j -4 addr`. (Node's
 * `os.networkInterfaces()` leaves out interfaces that are down, such as the taps of a server
 * that was killed: their addresses are still routed and still collide.)
 */
export async function hostIPv4Addresses(): Promise<HostAddress[]> {
  const { stdout: text } = await runCommand(["ip", "-j", "-4", "addr", "show"], { errorCode: "NETWORK_SETUP_FAILED" });
  const links = JSON.parse(text || "[]") as Array<{
    ifname?: string;
    flags?: string[];
    addr_info?: Array<{ family?: string; local?: string; prefixlen?: number }>;
  }>;
  const out: HostAddress[] = [];
  for (const l of links) {
    for (const a of l.addr_info ?? []) {
      if (a.family !== "inet" || !a.local) continue;
      out.push({ iface: l.ifname ?? "?", address: a.local, prefix: a.prefixlen ?? 32, up: (l.flags ?? []).includes("UP") });
    }
  }
  return out;
}

/** Whether two IPv4 networks share an address. */
export function cidrsOverlap(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  const bits = Math.min(x.bits, y.bits);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (x.base & mask) >>> 0 === (y.base & mask) >>> 0;
}

/** The pools a server tries when none is configured: 10.201.0.0/16, 10.202.0.0/16, ... 10.232.0.0/16. */
export function defaultPools(): string[] {
  return Array.from({ length: 32 }, (_, i) => `10.${201 + i}.0.0/16`);
}

export interface PoolChoice {
  /** The pool taken, or null when none is free (`reason` says why). */
  subnet: string | null;
  reason: string;
  /** Why each pool passed over was not free (for the log, and the error when none is). */
  skipped: string[];
  /** Gives the claim back (at shutdown). Idempotent. */
  release(): void;
}

interface ClaimRecord {
  pid: number;
  dataDir: string;
}

/** The network namespace the process is in: pools are per namespace. */
function netnsId(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/net"))?.[1] ?? "default";
  } catch {
    return "default";
  }
}

/**
 * The configured pool, or else (none configured) the one this data dir used before, then the
 * first free of `defaultPools()`; the choice is remembered in `stateFile`.
 */
export async function choosePool(opts: {
  configured?: string | undefined;
  stateFile: string;
  ownPrefix: string;
  dataDir: string;
  claimsDir: string;
}): Promise<PoolChoice> {
  const previous = existsSync(opts.stateFile) ? readFileSync(opts.stateFile, "utf8").trim() : "";
  const candidates = opts.configured ? [opts.configured] : [...new Set([...(previous ? [previous] : []), ...defaultPools()])];
  const choice = await claimFreePool({ ...opts, candidates });
  if (choice.subnet) writeFileSync(opts.stateFile, `${choice.subnet}\n`);
  else if (opts.configured) {
    choice.reason = `the sandbox address pool ${choice.skipped.join("; ")}: free it or set SANDTREE_NETWORK_SUBNET to another pool`;
  } else {
    choice.reason = `no free sandbox address pool (${choice.skipped.slice(0, 3).join("; ")}; ...): set SANDTREE_NETWORK_SUBNET`;
  }
  return choice;
}

/**
 * Picks the first pool of `candidates` that no address of this host overlaps (except on
 * interfaces named `ownPrefix*`: this server's taps from before a restart) and that no other
 * live server of this namespace has claimed (claims are files under `claimsDir`, so two servers
 * that start before either has a tap still get different pools; a claim whose process is gone
 * is taken over). The claim is held until `release()`.
 */
export async function claimFreePool(opts: {
  candidates: string[];
  ownPrefix: string;
  dataDir: string;
  claimsDir: string;
}): Promise<PoolChoice> {
  const addresses = await hostIPv4Addresses();
  const skipped: string[] = [];
  const dir = path.join(opts.claimsDir, `netns-${netnsId()}`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const me: ClaimRecord = { pid: process.pid, dataDir: path.resolve(opts.dataDir) };
  for (const subnet of opts.candidates) {
    const clash = addresses.find(
      (a) => !a.iface.startsWith(opts.ownPrefix) && a.iface !== "lo" && cidrsOverlap(subnet, `${a.address}/${a.prefix}`),
    );
    if (clash) {
      const net = parseCidr(`${clash.address}/${clash.prefix}`);
      skipped.push(
        `${subnet} overlaps ${clash.address}/${clash.prefix} (${intToIp(net.base)}/${net.bits}) on ${clash.iface}` +
          `${clash.up ? "" : " (down)"}${/^st[a-z0-9]{1,6}-\d+$/.test(clash.iface) ? `, a tap of another sandtree server: remove it with \`ip link del ${clash.iface}\` if that server is gone` : ""}`,
      );
      continue;
    }
    const file = path.join(dir, `${subnet.replace("/", "_")}.json`);
    const holder = claimHolder(file);
    if (holder && holder.pid !== me.pid && holder.dataDir !== me.dataDir && pidAlive(holder.pid)) {
      skipped.push(`${subnet} is the pool of the sandtree server with pid ${holder.pid} (data dir ${holder.dataDir})`);
      continue;
    }
    if (!writeClaim(file, me, existsSync(file))) {
      skipped.push(`${subnet} was claimed by another server starting at the same time`);
      continue;
    }
    let released = false;
    return {
      subnet,
      reason: "",
      skipped,
      release() {
        if (released) return;
        released = true;
        if (claimHolder(file)?.pid === me.pid) rmSync(file, { force: true });
        removeIfEmpty(dir);
      },
    };
  }
  removeIfEmpty(dir);
  return { subnet: null, reason: "no free pool", skipped, release() {} };
}

/** Leaves no empty per-namespace claims directory behind (another server's claim keeps it). */
function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // ENOTEMPTY (another live claim) or already gone: both fine.
  }
}

function claimHolder(file: string): ClaimRecord | null {
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as Partial<ClaimRecord>;
    return typeof r.pid === "number" && typeof r.dataDir === "string" ? { pid: r.pid, dataDir: r.dataDir } : null;
  } catch {
    return null;
  }
}

/** Creates the claim file exclusively (after removing a stale one); false when another process won. */
function writeClaim(file: string, me: ClaimRecord, stale: boolean): boolean {
  if (stale) rmSync(file, { force: true });
  let fd: number;
  try {
    fd = openClaim(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    const h = claimHolder(file);
    return h !== null && (h.pid === me.pid || h.dataDir === me.dataDir);
  }
  try {
    writeSync(fd, JSON.stringify(me));
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Opens a new claim file; recreates the directory if a releasing server removed it meanwhile. */
function openClaim(file: string): number {
  try {
    return openSync(file, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
    return openSync(file, "wx", 0o644);
  }
}
