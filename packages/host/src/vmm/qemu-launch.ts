import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, realpathSync } from "node:fs";
import path from "node:path";
import { ownTap } from "../network/tap-owner.js";
import { freePageReporting, privateRamEnv } from "./free-page-reporting.js";
import { type JailConfig, JailLease, type JailRoot, jailOwnsTap } from "./jail.js";
import { buildQemuArgs, type QemuVmSpec } from "./qemu-args.js";

/**
 * The descriptors a QEMU is started with beside stdio: the shared read-only boot files (their
 * directories may be closed to the VM's uid: it reads them as `/proc/self/fd/N`), and the saved
 * state a restore loads (`migrate-incoming fd:N`).
 */
const FD_KERNEL = 3;
const FD_INITRAMFS = 4;
const FD_MODULES = 5;
export const INCOMING_FD = 6;

export interface LaunchOptions {
  spec: QemuVmSpec;
  /** The VM's socket directory (QMP, agent, pid file): made the VM's own. */
  runDir: string;
  /** QEMU's stdout and stderr (opened by the host). */
  logFile: string;
  /** A saved state to load (`spec.incoming`), passed as INCOMING_FD. */
  incomingFile?: string;
  binary?: string;
  /** The host's jail (its `enabled` false: QEMU runs as this process's user, unfiltered). */
  jail: JailConfig;
}

export interface Launched {
  child: ChildProcess;
  lease: JailLease | null;
}

/**
 * Grants the VM's uid exactly its files: its run directory, console log, root disk and (a
 * template's) RAM file become its own; its disk's backing chain is readable; a clone's template
 * RAM file is readable and writable (QEMU 7.2 opens a private file mapping read-write); under
 * KVM, /dev/kvm is readable and writable.
 */
async function grantFiles(lease: JailLease, o: LaunchOptions): Promise<void> {
  const { spec } = o;
  lease.own(o.runDir);
  closeSync(openSync(spec.consoleLog, "a"));
  lease.own(spec.consoleLog);
  const readable: string[] = [o.runDir, spec.consoleLog];
  if (spec.rootDisk) {
    lease.own(spec.rootDisk);
    readable.push(spec.rootDisk, ...JailLease.backingChain(spec.rootDisk));
  }
  const writable: string[] = [];
  if (spec.memoryFile?.share) {
    if (!existsSync(spec.memoryFile.path)) closeSync(openSync(spec.memoryFile.path, "a"));
    lease.own(spec.memoryFile.path);
    readable.push(spec.memoryFile.path);
  } else if (spec.memoryFile) {
    writable.push(spec.memoryFile.path);
  }
  // Under KVM QEMU opens /dev/kvm itself, which hosts keep 0660 root:kvm (a guest's devtmpfs:
  // 0600): the VM's uid, which has no group, gets its own ACL entry, removed with the lease.
  if (spec.accel === "kvm" && existsSync(KVM_DEVICE)) writable.push(KVM_DEVICE);
  // One setfacl: what it writes (a clone's template RAM and /dev/kvm) and what it reads.
  await lease.allow([
    { files: writable, perm: "rw" },
    { files: readable, perm: "r" },
  ]);
  // sandtree-jail makes the tap the uid's own as it starts; the shell launcher cannot.
  if (spec.tap && !jailOwnsTap()) await ownTap(spec.tap, lease.uid);
}

const KVM_DEVICE = "/dev/kvm";

/**
 * The files a VM's jailed QEMU sees (jail-root.ts), at the paths it is given: its run directory
 * and console log; its disk's directory (the layers directory: the overlays a disk snapshot puts
 * on top appear there while it runs; not listable, each file closed by its mode); its backing
 * chain, read-only, with the real files behind links (a base layer in the image cache); its RAM
 * file; /dev/kvm under KVM; `preload`, the library a clone's QEMU preloads (free-page-reporting.ts).
 * Kernel, initramfs, modules and a saved state come as descriptors.
 */
export function jailRootOf(o: Pick<LaunchOptions, "spec" | "runDir" | "binary">, preload?: string): JailRoot {
  const { spec } = o;
  const rw = [o.runDir, spec.consoleLog];
  const ro: string[] = [];
  if (spec.rootDisk) {
    rw.push(path.dirname(path.resolve(spec.rootDisk)));
    for (const f of [spec.rootDisk, ...JailLease.backingChain(spec.rootDisk)]) {
      ro.push(f);
      const real = realpathSync(f);
      if (real !== path.resolve(f)) ro.push(real);
    }
  }
  if (spec.memoryFile) rw.push(spec.memoryFile.path);
  if (o.binary && path.isAbsolute(o.binary)) ro.push(realpathSync(o.binary));
  if (preload) ro.push(preload);
  return { rw, ro, ...(spec.accel === "kvm" ? { devices: [KVM_DEVICE] } : {}) };
}

/**
 * Starts QEMU for `spec`, jailed (jail.ts) unless the jail is off: the spawned pid is QEMU's own
 * (adoption after a restart finds it by pid and `-name`). On a failure before the spawn the
 * lease is released; afterwards the caller releases it once QEMU exited.
 */
export async function launchQemu(o: LaunchOptions): Promise<Launched> {
  mkdirSync(o.runDir, { recursive: true, mode: 0o700 });
  const lease = await JailLease.acquire(o.jail, o.spec.name);
  const fds: number[] = [];
  try {
    if (lease) await grantFiles(lease, o);
    const open = (file: string | undefined, flags = "r") => {
      if (!file) return "ignore" as const;
      const fd = openSync(file, flags);
      fds.push(fd);
      return fd;
    };
    const boot = !o.spec.incoming;
    const stdio = [
      "ignore",
      open(o.logFile, "a"),
      "ignore",
      open(boot ? o.spec.kernel : undefined),
      open(boot ? o.spec.initramfs : undefined),
      open(o.spec.modulesDisk),
      open(o.incomingFile),
    ] as const;
    const fdPath = (n: number) => `/proc/self/fd/${n}`;
    // Free page reporting where this host runs it (a caller may only turn it off), with a clone's
    // preload library: never on a host without the library.
    const fpr = o.spec.freePageReporting !== false && freePageReporting();
    const env = fpr ? privateRamEnv(o.spec.memoryFile) : {};
    const spec: QemuVmSpec = {
      ...o.spec,
      freePageReporting: fpr,
      kernel: fdPath(FD_KERNEL),
      initramfs: fdPath(FD_INITRAMFS),
      ...(o.spec.modulesDisk ? { modulesDisk: fdPath(FD_MODULES) } : {}),
    };
    const args = buildQemuArgs(spec);
    const [file, argv] = lease
      ? lease.argv(o.binary ?? "qemu-system-x86_64", args, {
          tun: o.spec.tap !== undefined,
          ...(o.spec.tap ? { tap: o.spec.tap } : {}),
          // A TCG clone's translation cache resident by the 4 KiB page (docs/architecture.md,
          // density); its RAM is a private mapping of a file, never huge. A cold boot's anonymous
          // RAM keeps its huge pages (a large guest under TCG slows without them), as under KVM.
          noHugePages: o.spec.accel === "tcg" && o.spec.memoryFile?.share === false,
          root: jailRootOf(o, env.LD_PRELOAD),
        })
      : [o.binary ?? "qemu-system-x86_64", args];
    const log = stdio[1];
    // Own process group: a Ctrl-C meant for the server must not kill guests mid-write.
    const child = spawn(file, argv, {
      stdio: ["ignore", log, log, stdio[3], stdio[4], stdio[5], stdio[6]],
      detached: true,
      ...(env.LD_PRELOAD ? { env: { ...process.env, ...env } } : {}),
    });
    child.on("error", () => {});
    return { child, lease };
  } catch (err) {
    await lease?.release();
    throw err;
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}
