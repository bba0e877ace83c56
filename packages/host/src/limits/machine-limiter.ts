import { SandtreeError } from "@sandtree/protocol";
import { blockDeviceOf } from "./block-device.js";
import { detectCgroups } from "./cgroup-fs.js";
import { type CgroupUsage, MachineCgroups } from "./machine-cgroups.js";
import { cgroupValues, type MachineRates } from "./machine-limits.js";
import { applyTapRate, checkTc, sweepTapRates } from "./tap-rate.js";

export interface MachineLimiterOptions {
  /** Sandbox disks live here: its block device gets the disk rates. */
  dataDir: string;
  /** Sandboxes have taps: `tc` must run (checked now). */
  network: boolean;
  /** The cgroup filesystem (tests: a fake directory). */
  cgroupRoot?: string;
  /** The cgroup directory holding one per machine. */
  parent?: string;
  tc?: string;
  /** Lines about what was found and cleaned at start. */
  log?: (fields: object, msg: string) => void;
}

/**
 * The resource limits of every machine on this host: its cgroup (CPU to its vCPUs, memory to its
 * size plus QEMU's overhead, pids, disk rates) and its tap's rate. Opened once per server; a host
 * without the needed cgroup controllers, or without `tc` while networks are on, is refused with
 * the reason (SANDTREE_RESOURCE_LIMITS=off runs without limits, for debugging only).
 */
export class MachineLimiter {
  private constructor(
    readonly cgroups: MachineCgroups,
    /** "MAJOR:MINOR" of the data directory's disk, or null (no block device: no disk rate). */
    readonly device: string | null,
    private readonly tc: string | undefined,
  ) {}

  static async open(opts: MachineLimiterOptions): Promise<MachineLimiter> {
    const layout = detectCgroups(opts.cgroupRoot);
    if (!layout) {
      throw new SandtreeError(
        "NOT_SUPPORTED",
        "resource limits need the cpu, memory, pids and blkio/io cgroup controllers (v1 or v2), and none were found under /sys/fs/cgroup",
      );
    }
    if (opts.network) await checkTc(opts.tc);
    const cgroups = new MachineCgroups(layout, opts.parent ? { parent: opts.parent } : {});
    const device = blockDeviceOf(opts.dataDir);
    // An earlier server's leftovers: empty cgroups, ifbs whose tap is gone. Cgroups holding a
    // running QEMU stay (they are adopted with it).
    const removed = cgroups.sweep();
    const ifbs = opts.network ? await sweepTapRates() : [];
    opts.log?.(
      { cgroups: `v${layout.version}`, device: device ?? "none", removedCgroups: removed.length, removedIfbs: ifbs.length },
      "resource limits on",
    );
    return new MachineLimiter(cgroups, device, opts.tc);
  }

  /** Puts the network rate on the machine's tap (before the machine runs). */
  async limitTap(tap: string, rates: MachineRates, signal?: AbortSignal): Promise<void> {
    await applyTapRate(tap, rates.netMbit, { ...(this.tc ? { tc: this.tc } : {}), ...(signal ? { signal } : {}) });
  }

  /** Moves a just-spawned QEMU into its cgroup, filled for its shape and rates. Throws on failure. */
  place(name: string, pid: number, shape: { cpuCores: number; memoryMb: number }, rates: MachineRates): void {
    this.cgroups.place(name, pid, cgroupValues(shape, rates, this.device));
  }

  /**
   * Once the machine exited: its cgroup goes. Idempotent. (The tap's ifb lives as long as the tap,
   * which outlives a machine replaced by a reset: NetworkManager.deleteTap removes both.)
   */
  async release(name: string): Promise<boolean> {
    return this.cgroups.removeWhenEmpty(name);
  }

  usage(name: string): CgroupUsage {
    return this.cgroups.usage(name);
  }
}
