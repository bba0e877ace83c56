import path from "node:path";
import type { JailConfig } from "./jail.js";
import type { GuestBoot, QemuVmSpec } from "./qemu-args.js";

export interface VmOptions extends GuestBoot {
  rootDisk?: string;
  /** Holds the sockets and pid file; removed on stop. Keep it short (Unix socket paths). */
  runDir: string;
  /** Holds console.log and qemu.log; kept after stop for post-mortems. */
  logDir: string;
  bootTimeoutMs?: number;
  signal?: AbortSignal;
  qemuBinary?: string;
  /** Guest RAM in a file (templates share it; clones map it copy-on-write). */
  memoryFile?: { path: string; share: boolean };
  /** Resume from a state saved by saveVmState (RAM from `memoryFile`) instead of booting. */
  restoreFrom?: string;
  /** A NIC on this tap device (created beforehand by the network manager). */
  tap?: string;
  /** eth0's configuration, sent with every handshake: "ADDR/PREFIX GATEWAY", or "-" for none. */
  guestNet?: string;
  /**
   * The guest stops before reading its root disk (`sandtree.root=wait`): a warm template boots so.
   * With `restoreFrom` (a clone of such a template) the clone's `rootDisk` is resized to its own
   * size in QEMU and the agent mounts it at the handshake.
   */
  rootWait?: boolean;
  /** Hardware virtualization for the guest (cpuModel in qemu-args.ts). */
  nested?: boolean;
  /** Runs with QEMU's pid the moment it is spawned (its cgroup); a throw fails the start and kills it. */
  onSpawn?: (pid: number) => void;
  /** The root disk's writable top opened O_DIRECT, and every overlay a snapshot puts on it (DiskCache). */
  directDisk?: boolean;
  /** The jail QEMU runs in (its host's option; default: defaultJailConfig(), on when root). */
  jail?: JailConfig;
}

/** A QEMU that outlived the server which started it (found by its pid and `-name`). */
export interface AdoptOptions {
  /** QEMU's `-name`: its command line must carry it, since pids are reused. */
  name: string;
  pid: number;
  /** The run directory it was started with (QMP and agent sockets). */
  runDir: string;
  logDir: string;
  /**
   * The one deadline of the whole adoption (default 10 s): QMP connect and commands, the agent's
   * connect and handshake, disk discovery. A VM that misses it is killed (SIGKILL, which also
   * ends a stopped process) and adopt() throws.
   */
  connectTimeoutMs?: number;
  /** eth0's configuration, re-sent with the handshake (see VmOptions.guestNet). */
  guestNet?: string;
  /**
   * The sandbox was PAUSED: its CPUs are stopped again once the agent has answered. A stopped
   * guest cannot answer the handshake, so whatever QEMU's run state (paused by us, by a crash
   * mid-pause or mid-checkpoint), the VM is continued for the handshake first.
   */
  keepPaused?: boolean;
  signal?: AbortSignal;
  /** Overlays later snapshots put on its disk are opened O_DIRECT (as its host starts disks). */
  directDisk?: boolean;
  /** The jail of the host adopting it (default: defaultJailConfig()): its lease is taken over when QEMU runs as a uid of its pool. */
  jail?: JailConfig;
}

export type VmPaths = Pick<VmOptions, "name" | "runDir" | "logDir" | "rootDisk" | "directDisk">;

/** QEMU's own spec of a VM started with `opts`, its control sockets and modules disk chosen by the caller. */
export function qemuSpecOf(
  opts: VmOptions,
  files: { agentSocket: string; qmpSocket: string; modulesDisk: string | null | undefined },
): QemuVmSpec {
  const { agentSocket, qmpSocket, modulesDisk } = files;
  return {
    name: opts.name,
    accel: opts.accel,
    cpuCores: opts.cpuCores,
    memoryMb: opts.memoryMb,
    kernel: opts.kernel,
    initramfs: opts.initramfs,
    ...(opts.rootDisk ? { rootDisk: opts.rootDisk } : {}),
    ...(modulesDisk ? { modulesDisk } : {}),
    agentSocket,
    qmpSocket,
    consoleLog: path.join(opts.logDir, "console.log"),
    pidFile: path.join(opts.runDir, "qemu.pid"),
    ...(opts.memoryFile ? { memoryFile: opts.memoryFile } : {}),
    ...(opts.restoreFrom ? { incoming: true } : {}),
    ...(opts.tap ? { tap: opts.tap } : {}),
    ...(opts.rootWait ? { extraKernelArgs: ["sandtree.root=wait"] } : {}),
    ...(opts.nested ? { nested: true } : {}),
    ...(opts.directDisk ? { directDisk: true } : {}),
  };
}
