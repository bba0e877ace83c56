/**
 * The rates a sandbox may use, chosen by the control plane (a default, overridden per team).
 * CPU, memory and pids follow from the machine's shape (see cgroupValues).
 */
export interface MachineRates {
  /** Disk reads and writes, each, in bytes per second. */
  diskBytesPerSec: number;
  /** Disk read and write operations, each, per second. */
  diskIops: number;
  /** Network, each direction, in megabits per second. */
  netMbit: number;
}

/** What a machine gets when its spec names no rates (the team defaults of the control plane). */
export const DEFAULT_MACHINE_RATES: MachineRates = {
  diskBytesPerSec: 256 * 1024 * 1024,
  diskIops: 10_000,
  netMbit: 1000,
};

/**
 * QEMU's memory beyond the guest's RAM: its translation cache under TCG (capped at
 * TCG_TB_SIZE_MB, 256 MiB, in qemu-args.ts) plus the rest (libraries, devices, I/O buffers):
 * peak RSS minus guest RAM measured 20 MiB (256 MiB guest) and 80 MiB (1 GiB guest) after a
 * boot, a CPU loop and a RAM-sized write (bench/isolation.mjs), translation cache included;
 * 128 MiB is allowed for the rest. The memory limit is the guest's RAM plus this.
 */
export const QEMU_OVERHEAD_MB = 256 + 128;

/**
 * The cgroup's memory limit for a guest of `memoryMb`: its RAM, QEMU's overhead, and as much
 * again as its RAM (at least 256 MiB) for the host's page cache of its disk, which the kernel
 * charges to the QEMU's cgroup. Without that room a guest writing its disk hard filled the
 * cgroup with dirty cache, and on cgroup v1 (no dirty throttling per cgroup) reclaim waited on
 * writeback until the guest stalled: a 3 GiB guest unpacking a 400 MB archive went unresponsive
 * (the nested KVM suite). The guest's own RAM stays bounded by `-m`; this bounds the VMM.
 */
export function memoryLimitBytes(memoryMb: number): number {
  return (memoryMb + QEMU_OVERHEAD_MB + Math.max(256, memoryMb)) * 1024 * 1024;
}

/** Threads of one QEMU: its vCPUs, the main loop, RCU and call threads, its I/O thread pool (64). */
export const QEMU_PIDS_MAX = 256;

export const CFS_PERIOD_US = 100_000;

/** What one machine's cgroup is set to. */
export interface CgroupValues {
  /** CPU time per period: one period per vCPU. */
  cpuQuotaUs: number;
  cpuPeriodUs: number;
  memoryBytes: number;
  pidsMax: number;
  /** Disk rate on `device` ("MAJOR:MINOR"); null: the data directory has no block device of its own. */
  io: { device: string; bps: number; iops: number } | null;
}

export function cgroupValues(
  shape: { cpuCores: number; memoryMb: number },
  rates: MachineRates,
  device: string | null,
): CgroupValues {
  return {
    cpuQuotaUs: shape.cpuCores * CFS_PERIOD_US,
    cpuPeriodUs: CFS_PERIOD_US,
    memoryBytes: memoryLimitBytes(shape.memoryMb),
    pidsMax: QEMU_PIDS_MAX,
    io: device ? { device, bps: rates.diskBytesPerSec, iops: rates.diskIops } : null,
  };
}
