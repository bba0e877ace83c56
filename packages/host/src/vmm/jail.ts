import { spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { qcow2BackingName } from "../disks/overlay.js";
import { jailerBinary } from "../paths.js";
import { pidAlive } from "../util/pid-alive.js";
import { grantAcl, renameKeepingGrants, setfacl } from "./jail-acl.js";
import { type JailRoot, jailRootArgs, jailRootPlan, jailRootSteps } from "./jail-root.js";

export type { JailRoot } from "./jail-root.js";
export { renameKeepingGrants };

/**
 * QEMU's own seccomp filter with every deny option: no obsolete syscalls, no setuid/setgid,
 * no fork/exec, no scheduler or resource changes. It must be installed by a QEMU started as its
 * unprivileged uid (with `-runas` QEMU's own filter kills it: FACTS.md).
 */
export const QEMU_SANDBOX = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";

/** How a host's QEMUs are jailed (docs/security.md): an option of each host, not of the process. */
export interface JailConfig {
  /** Off only for debugging (SANDTREE_JAIL=off): QEMU then runs as the server's user, unfiltered. */
  enabled: boolean;
  /** The first uid (and gid) of the pool; each VM gets its own. */
  uidBase: number;
  uidCount: number;
  /** Host-wide lock files of the pool (one per uid in use), shared by every server on the host. */
  stateDir: string;
}

/** The pool's lock files (and the jail's mountpoint): host-wide, shared by every host object and server on the machine. */
export const JAIL_STATE_DIR = "/run/sandtree-jail";

/**
 * The jail a host gets when its options name none: on when this process runs as root (only root
 * can give QEMU its own uid), over the default pool. `over` replaces any of its fields.
 */
export function defaultJailConfig(over: Partial<JailConfig> = {}): JailConfig {
  return {
    enabled: typeof process.getuid === "function" && process.getuid() === 0,
    uidBase: 1_100_000,
    uidCount: 4096,
    stateDir: JAIL_STATE_DIR,
    ...over,
  };
}

interface Grant {
  path: string;
  /** `own`: chowned to the VM's uid (given back to root); `acl`: a named-user ACL entry (removed). */
  kind: "own" | "acl";
}

interface LockRecord {
  name: string;
  owner: number;
  grants: Grant[];
}

const lockFileIn = (stateDir: string, uid: number) => path.join(stateDir, `uid-${uid}.json`);

function readLockIn(stateDir: string, uid: number): LockRecord | null {
  try {
    return JSON.parse(readFileSync(lockFileIn(stateDir, uid), "utf8")) as LockRecord;
  } catch {
    return null;
  }
}

/** The real uids of every process on the host (a uid with a process is never reused). */
function uidsInUse(): Set<number> {
  const uids = new Set<number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${e}/status`, "utf8"));
      if (m?.[1]) uids.add(Number(m[1]));
    } catch {}
  }
  return uids;
}

/** Undoes a lease's grants: owned files back to root, ACL entries removed. Idempotent. */
async function undoGrants(uid: number, grants: Grant[]): Promise<void> {
  for (const g of grants) {
    if (g.kind !== "own") continue;
    try {
      chownSync(g.path, 0, 0);
    } catch {}
  }
  const acl = [...new Set(grants.filter((g) => g.kind === "acl").map((g) => g.path))];
  // setfacl goes on past a missing file and exits non-zero: what is gone holds no grant.
  if (acl.length) await setfacl(["-x", `u:${uid}`, "--", ...acl]).catch(() => {});
}

let warnedMissing = false;
let checked: { file: string; mtimeMs: number; current: boolean } | null = null;

/**
 * Whether the launcher at `file` knows every step this code passes it: one built from an older
 * checkout (setup not run since) reads `--no-thp` as an option needing a value and says so.
 */
function launcherCurrent(file: string): boolean {
  const mtimeMs = statSync(file).mtimeMs;
  if (checked?.file === file && checked.mtimeMs === mtimeMs) return checked.current;
  const probe = spawnSync(file, ["--no-thp"], { encoding: "utf8", timeout: 10_000 });
  const current = !String(probe.stderr ?? "").includes("missing value");
  checked = { file, mtimeMs, current };
  return current;
}

/**
 * sandtree-jail as setup built it (scripts/build-jailer.sh), or null: the launcher is then the
 * older unshare, sh and setpriv chain (the same jail, a dozen more processes a start, huge pages
 * kept), and a warning says so once. A launcher older than this code counts as missing.
 */
export function jailerPath(): string | null {
  const file = jailerBinary();
  if (existsSync(file) && launcherCurrent(file)) return file;
  if (!warnedMissing) {
    warnedMissing = true;
    const why = existsSync(file) ? "is older than this checkout" : "is missing";
    process.emitWarning(`${file} ${why} (run setup again): QEMUs are jailed through unshare, sh and setpriv`, {
      code: "SANDTREE_JAILER_MISSING",
    });
  }
  return null;
}

export interface JailCommandOptions {
  /** The namespace's own /dev/net/tun. */
  tun?: boolean;
  /**
   * A host tap made the uid's own (TUNSETOWNER, TUNSETGROUP) before the namespace is entered:
   * by sandtree-jail only; with the shell launcher the caller runs ownTap (jailOwnsTap false).
   */
  tap?: string;
  root?: JailRoot;
  stateDir?: string;
  /**
   * Transparent huge pages off for the program (sandtree-jail only; the shell launcher has no
   * way to: it keeps them). Under TCG: QEMU madvises its translation cache huge, so each region
   * it touches is resident by 2 MiB; with this, by the 4 KiB page.
   */
  noHugePages?: boolean;
  /** `shell`: the unshare/sh/setpriv chain even where sandtree-jail is built (benchmarks). */
  via?: "jailer" | "shell";
}

/** Whether jailCommand with these options makes the tap the uid's own itself. */
export function jailOwnsTap(opts: Pick<JailCommandOptions, "via"> = {}): boolean {
  return opts.via !== "shell" && jailerPath() !== null;
}

/**
 * The jail's launcher for `argv` as `uid`, exec by exec so the spawned pid is the program's own:
 * a private mount namespace whose root is built for it alone (jail-root.ts: its files, /usr,
 * basic devices, its own /proc showing the jailed uid's processes alone), then `uid` and gid
 * `uid` with no supplementary groups, no capability (bounding, ambient and inheritable sets
 * cleared) and no_new_privs. One process, sandtree-jail, does all of it from its argv; without
 * it, unshare runs sh's mount steps and setpriv. The escape test runs its probe through this
 * same function.
 */
export function jailCommand(uid: number, argv: string[], opts: JailCommandOptions = {}): [string, string[]] {
  const mountpoint = path.join(opts.stateDir ?? JAIL_STATE_DIR, "root");
  mkdirSync(mountpoint, { recursive: true, mode: 0o700 });
  const plan = jailRootPlan(opts.root ?? { rw: [], ro: [] }, opts.tun ? { tun: true } : {});
  const jailer = opts.via === "shell" ? null : jailerPath();
  if (jailer) {
    const tap = opts.tap ? ["--tap", opts.tap] : [];
    const thp = opts.noHugePages ? ["--no-thp"] : [];
    return [jailer, ["--root", mountpoint, "--uid", String(uid), ...tap, ...thp, ...jailRootArgs(plan), "--", ...argv]];
  }
  return shellJailCommand(uid, `set -e; ${jailRootSteps(mountpoint, plan).join("; ")}; exec "$@"`, argv);
}

/**
 * The launcher without sandtree-jail: unshare gives a private mount namespace, sh runs `script`
 * there (its mount steps, ending in `exec "$@"`), then setpriv drops to `uid` as jailCommand says.
 * Benchmarks time it with other scripts (the launcher before the jail's root).
 */
export function shellJailCommand(uid: number, script: string, argv: string[]): [string, string[]] {
  return [
    "unshare",
    [
      "--mount",
      "--propagation",
      "private",
      "--",
      "/bin/sh",
      "-c",
      script,
      "sandtree-jail",
      "setpriv",
      `--reuid=${uid}`,
      `--regid=${uid}`,
      "--clear-groups",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--no-new-privs",
      "--",
      ...argv,
    ],
  ];
}

let nextIndex = Math.floor(Math.random() * 4096);

/**
 * One VM's place in the jail: its own uid and gid from the pool, the files it may use, and the
 * command line that starts QEMU as that uid. A uid is reused only once its lease is released
 * (the VM gone, its grants undone) or its holder died with no process left running as it.
 */
export class JailLease {
  private released = false;

  private constructor(
    private readonly stateDir: string,
    readonly uid: number,
    readonly name: string,
    private grants: Grant[],
  ) {}

  /** Takes a free uid of `config`'s pool for the VM `name`; null when that jail is off. */
  static async acquire(config: JailConfig, name: string): Promise<JailLease | null> {
    if (!config.enabled) return null;
    const lockFile = (uid: number) => lockFileIn(config.stateDir, uid);
    const readLock = (uid: number) => readLockIn(config.stateDir, uid);
    mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
    let inUse: Set<number> | null = null;
    for (let i = 0; i < config.uidCount; i++) {
      const uid = config.uidBase + ((nextIndex + i) % config.uidCount);
      const lease = new JailLease(config.stateDir, uid, name, []);
      if (!lease.create()) {
        // Taken: reclaimable only when its holder is gone and nothing runs as the uid.
        const held = readLock(uid);
        if (held && pidAlive(held.owner)) continue;
        inUse ??= uidsInUse();
        if (inUse.has(uid)) continue;
        await undoGrants(uid, held?.grants ?? []);
        // Another process may have reclaimed it while the grants were undone (and handed it to a
        // VM): remove the lock only if it is still the dead holder's, else two VMs share a uid and
        // one's release takes the other's grants away (a restore's QEMU got EACCES on its backing file).
        if (JSON.stringify(readLock(uid)) !== JSON.stringify(held)) continue;
        rmSync(lockFile(uid), { force: true });
        if (!lease.create()) continue;
      }
      nextIndex = (nextIndex + i + 1) % config.uidCount;
      return lease;
    }
    throw new Error(`no free uid in the jail's pool (${config.uidBase}..${config.uidBase + config.uidCount - 1})`);
  }

  /** The lease of a VM that outlived its server (found by its QEMU's uid), taken over by this process. */
  static adopt(config: JailConfig, name: string, pid: number): JailLease | null {
    if (!config.enabled) return null;
    let uid: number;
    try {
      const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      uid = Number(m?.[1] ?? 0);
    } catch {
      return null;
    }
    if (uid < config.uidBase || uid >= config.uidBase + config.uidCount) return null;
    const held = readLockIn(config.stateDir, uid);
    const lease = new JailLease(config.stateDir, uid, name, held?.name === name ? held.grants : []);
    lease.save();
    return lease;
  }

  /**
   * The lock's record, written whole to a temporary file: a lock is never seen empty or half
   * written. An empty lock read as "no record" let a second process (finding no live holder and
   * no process of the uid yet) reclaim the uid of a VM still being granted its files.
   */
  private writeTemp(): string {
    const rec: LockRecord = { name: this.name, owner: process.pid, grants: this.grants };
    const tmp = `${lockFileIn(this.stateDir, this.uid)}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(rec), { mode: 0o600 });
    return tmp;
  }

  /** Takes the uid's lock if no one holds it (link fails on an existing name); false if taken. */
  private create(): boolean {
    const tmp = this.writeTemp();
    try {
      linkSync(tmp, lockFileIn(this.stateDir, this.uid));
      return true;
    } catch {
      return false;
    } finally {
      unlinkSync(tmp);
    }
  }

  private save(): void {
    renameSync(this.writeTemp(), lockFileIn(this.stateDir, this.uid));
  }

  /** Makes `file` (or a directory) the VM's own: chowned to its uid, no access for anyone else. */
  own(file: string): void {
    const dir = statSync(file).isDirectory();
    this.grants.push({ path: file, kind: "own" });
    this.save();
    chownSync(file, this.uid, this.uid);
    chmodSync(file, dir ? 0o700 : 0o600);
  }

  /**
   * Lets the VM open `files` (`rw`: read and write, the RAM file of a template it clones; `r`:
   * read, its disk's backing chain): a named-user ACL entry on each file others may not already
   * use. The directories on the way that others may not cross are made crossable (`o+x`, not
   * listable; kept): every entry at the data directory's top is closed on its own, and an ACL
   * per uid on directories many VMs share would churn. One setfacl for all the groups (its
   * `-m` applies to the files after it): a process start per VM is dear where the host's CPU is
   * emulated (nested KVM).
   */
  async allow(groups: Array<{ files: string[]; perm: "r" | "rw" }>): Promise<void> {
    const args: string[] = [];
    const granted: string[] = [];
    for (const { files, perm } of groups) {
      const want = perm === "rw" ? 0o6 : 0o4;
      const needFile = files.filter((f) => {
        const st = statSync(f);
        return st.uid !== this.uid && (st.mode & want) !== want;
      });
      // A base layer is a link into the image cache: the directories of both paths are walked.
      const walked = [...new Set(files.flatMap((f) => [path.resolve(f), realpathSync(f)]))];
      for (const f of walked) {
        for (let d = path.dirname(f); ; d = path.dirname(d)) {
          const st = statSync(d);
          if (st.uid !== this.uid && (st.mode & 0o001) === 0) chmodSync(d, (st.mode & 0o7777) | 0o001);
          if (d === path.dirname(d)) break;
        }
      }
      if (!needFile.length) continue;
      for (const p of needFile) this.grants.push({ path: p, kind: "acl" });
      // Absolute paths: no file name can read as an option (there is no `--` between groups).
      granted.push(...needFile.map((f) => path.resolve(f)));
      args.push("-m", `u:${this.uid}:${perm}`, ...needFile.map((f) => path.resolve(f)));
    }
    if (!args.length) return;
    this.save();
    await grantAcl(args, granted);
  }

  /** The qcow2 files `disk` reads through (its backing chain, from each header), `disk` excluded. */
  static backingChain(disk: string): string[] {
    const chain: string[] = [];
    let file = disk;
    for (let i = 0; i < 256; i++) {
      const b = qcow2BackingName(file);
      if (!b) break;
      file = path.resolve(path.dirname(file), b);
      chain.push(file);
    }
    return chain;
  }

  /** The argv that runs QEMU (`binary args`) in the jail (jailCommand) with its seccomp filter. */
  argv(binary: string, args: string[], opts: Omit<JailCommandOptions, "stateDir"> = {}): [string, string[]] {
    return jailCommand(this.uid, [binary, ...args, "-sandbox", QEMU_SANDBOX], { ...opts, stateDir: this.stateDir });
  }

  /** Gives the uid back: owned files to root, ACL entries removed, the lock file deleted. Idempotent. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    await undoGrants(this.uid, this.grants);
    rmSync(lockFileIn(this.stateDir, this.uid), { force: true });
  }
}
