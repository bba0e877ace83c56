import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { type CgroupLayout, controllerRoots } from "./cgroup-fs.js";
import type { CgroupValues } from "./machine-limits.js";

/** What a machine's cgroup counted: throttling, memory, tasks and disk bytes. */
export interface CgroupUsage {
  /** Quota periods in which it ran (counted only while a quota is set), those in which the quota ran out, and the time it waited. */
  cpuPeriods: number;
  cpuThrottledPeriods: number;
  cpuThrottledUs: number;
  memoryBytes: number;
  /** Highest memory use seen (v1 max_usage_in_bytes, v2 memory.peak where the kernel has it). */
  memoryPeakBytes: number;
  /** Times the memory limit was hit (v1 failcnt, v2 `max` events) and OOM kills inside the cgroup. */
  memoryLimitHits: number;
  oomKills: number;
  pids: number;
  /** Bytes read and written that the cgroup's I/O accounting saw. */
  ioBytes: number;
}

export interface MachineCgroupsOptions {
  /** The directory under each controller's root holding one cgroup per machine. */
  parent?: string;
  /** Removes an empty cgroup directory (tests of a fake cgroupfs remove plain directories). */
  rmdir?: (dir: string) => void;
}

const readText = (file: string): string => {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
};

/** `key value` lines (cpu.stat, memory.events, memory.oom_control) as numbers. */
function keyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && /^\d+$/.test(v)) out.set(k, Number(v));
  }
  return out;
}

const num = (text: string): number => Number(text.trim()) || 0;

/**
 * One cgroup per machine, `PARENT/NAME` under each controller (v1) or in the unified tree (v2):
 * created and filled in the moment after QEMU is spawned, removed (idempotently) once it exited.
 */
export class MachineCgroups {
  private readonly parent: string;
  private readonly rmdir: (dir: string) => void;
  /** Bumped by each place(): a removal waiting for an old machine's exit stops once a new one moved in. */
  private readonly placed = new Map<string, number>();

  constructor(
    readonly layout: CgroupLayout,
    opts: MachineCgroupsOptions = {},
  ) {
    this.parent = opts.parent ?? "sandtree";
    this.rmdir = opts.rmdir ?? ((dir) => rmdirSync(dir));
  }

  /** The cgroup directories of a machine, one per controller tree. */
  dirsOf(name: string): string[] {
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error(`bad machine name for a cgroup: ${name}`);
    return controllerRoots(this.layout).map((root) => path.join(root, this.parent, name));
  }

  /** Creates (or refills) the machine's cgroup with `values` and moves `pid`, all its threads with it. */
  place(name: string, pid: number, values: CgroupValues): void {
    this.placed.set(name, (this.placed.get(name) ?? 0) + 1);
    const w = (dir: string, file: string, value: string | number) => writeFileSync(path.join(dir, file), `${value}\n`);
    if (this.layout.version === 2) {
      const root = this.layout.root;
      const parent = path.join(root, this.parent);
      mkdirSync(parent, { recursive: true });
      // Controllers reach a child only when every ancestor's subtree_control names them.
      w(root, "cgroup.subtree_control", "+cpu +memory +pids +io");
      w(parent, "cgroup.subtree_control", "+cpu +memory +pids +io");
      const dir = path.join(parent, name);
      mkdirSync(dir, { recursive: true });
      w(dir, "cpu.max", `${values.cpuQuotaUs} ${values.cpuPeriodUs}`);
      w(dir, "memory.max", values.memoryBytes);
      w(dir, "memory.swap.max", 0);
      w(dir, "pids.max", values.pidsMax);
      if (values.io) {
        const { device, bps, iops } = values.io;
        w(dir, "io.max", `${device} rbps=${bps} wbps=${bps} riops=${iops} wiops=${iops}`);
      }
      w(dir, "cgroup.procs", pid);
      return;
    }
    const [cpu, memory, pids, blkio] = this.dirsOf(name) as [string, string, string, string];
    for (const dir of [cpu, memory, pids, blkio]) mkdirSync(dir, { recursive: true });
    // The period first: a quota longer than the current period is refused.
    w(cpu, "cpu.cfs_period_us", values.cpuPeriodUs);
    w(cpu, "cpu.cfs_quota_us", values.cpuQuotaUs);
    w(memory, "memory.limit_in_bytes", values.memoryBytes);
    w(pids, "pids.max", values.pidsMax);
    if (values.io) {
      const { device, bps, iops } = values.io;
      w(blkio, "blkio.throttle.read_bps_device", `${device} ${bps}`);
      w(blkio, "blkio.throttle.write_bps_device", `${device} ${bps}`);
      w(blkio, "blkio.throttle.read_iops_device", `${device} ${iops}`);
      w(blkio, "blkio.throttle.write_iops_device", `${device} ${iops}`);
    }
    for (const dir of [cpu, memory, pids, blkio]) w(dir, "cgroup.procs", pid);
  }

  /** Whether any process is in the machine's cgroup. */
  occupied(name: string): boolean {
    return this.dirsOf(name).some((dir) => readText(path.join(dir, "cgroup.procs")).trim() !== "");
  }

  /**
   * Removes the machine's cgroup; true once no directory of it is left. Idempotent; false while a
   * process is still inside (the kernel refuses: EBUSY), so call it after the machine exited.
   */
  remove(name: string): boolean {
    let gone = true;
    for (const dir of this.dirsOf(name)) {
      if (!existsSync(dir)) continue;
      try {
        this.rmdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") gone = false;
      }
    }
    return gone;
  }

  /** Removes once the exited machine's last thread is gone (the kernel frees a task a moment after its exit). */
  async removeWhenEmpty(name: string, opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const until = Date.now() + (opts.timeoutMs ?? 5000);
    const generation = this.placed.get(name);
    for (;;) {
      // The same machine name started again (a reset): the cgroup is the new machine's now.
      if (this.placed.get(name) !== generation) return false;
      if (this.remove(name)) {
        this.placed.delete(name);
        return true;
      }
      if (Date.now() > until) return false;
      await new Promise((r) => setTimeout(r, 50).unref());
    }
  }

  /** Names of the machine cgroups that exist now (in any controller tree). */
  list(): string[] {
    const names = new Set<string>();
    for (const root of controllerRoots(this.layout)) {
      const dir = path.join(root, this.parent);
      if (!existsSync(dir)) continue;
      for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) names.add(e.name);
    }
    return [...names];
  }

  /**
   * Removes the empty cgroups an earlier server left (a crash between a machine's exit and its
   * cleanup). A cgroup with a process in it belongs to a running machine (one to adopt, or another
   * server's) and stays; so does one younger than `minAgeMs`, which a server may be filling now.
   */
  sweep(opts: { minAgeMs?: number; now?: number } = {}): string[] {
    const minAge = opts.minAgeMs ?? 60_000;
    const now = opts.now ?? Date.now();
    const removed: string[] = [];
    for (const name of this.list()) {
      if (this.occupied(name)) continue;
      const young = this.dirsOf(name).some((dir) => {
        try {
          return now - statSync(dir).mtimeMs < minAge;
        } catch {
          return false;
        }
      });
      if (!young && this.remove(name)) removed.push(name);
    }
    return removed;
  }

  /** The machine's counters (zeros where the kernel does not keep one). */
  usage(name: string): CgroupUsage {
    const l = this.layout;
    if (l.version === 2) {
      const dir = path.join(l.root, this.parent, name);
      const cpu = keyed(readText(path.join(dir, "cpu.stat")));
      const events = keyed(readText(path.join(dir, "memory.events")));
      let ioBytes = 0;
      for (const m of readText(path.join(dir, "io.stat")).matchAll(/[rw]bytes=(\d+)/g)) ioBytes += Number(m[1]);
      const current = num(readText(path.join(dir, "memory.current")));
      return {
        cpuPeriods: cpu.get("nr_periods") ?? 0,
        cpuThrottledPeriods: cpu.get("nr_throttled") ?? 0,
        cpuThrottledUs: cpu.get("throttled_usec") ?? 0,
        memoryBytes: current,
        memoryPeakBytes: num(readText(path.join(dir, "memory.peak"))) || current,
        memoryLimitHits: events.get("max") ?? 0,
        oomKills: events.get("oom_kill") ?? 0,
        pids: num(readText(path.join(dir, "pids.current"))),
        ioBytes,
      };
    }
    const at = (root: string, file: string) => readText(path.join(root, this.parent, name, file));
    const cpu = keyed(at(l.cpu, "cpu.stat"));
    const io = /^Total (\d+)/m.exec(at(l.blkio, "blkio.throttle.io_service_bytes"));
    return {
      cpuPeriods: cpu.get("nr_periods") ?? 0,
      cpuThrottledPeriods: cpu.get("nr_throttled") ?? 0,
      cpuThrottledUs: Math.round((cpu.get("throttled_time") ?? 0) / 1000),
      memoryBytes: num(at(l.memory, "memory.usage_in_bytes")),
      memoryPeakBytes: num(at(l.memory, "memory.max_usage_in_bytes")),
      memoryLimitHits: num(at(l.memory, "memory.failcnt")),
      oomKills: keyed(at(l.memory, "memory.oom_control")).get("oom_kill") ?? 0,
      pids: num(at(l.pids, "pids.current")),
      ioBytes: io?.[1] ? Number(io[1]) : 0,
    };
  }
}
