import { type Accel, createQemuHost, type MachineHost, type MachineLimiter, type VolumeFileServer } from "@sandtree/host";
import type { VmDeadlines } from "./config.js";

/**
 * The host a server runs its machines on when none is given: this machine's QEMU microVMs. The
 * one place above the host package that names the implementation and maps its settings (the
 * architecture test allows it here and in config.ts, whose setting names are public).
 */
export function defaultHost(opts: {
  accel: Accel;
  deadlines: VmDeadlines;
  volumes: VolumeFileServer | undefined;
  /** Each machine in its own cgroup, its tap rate-limited (undefined: limits off, for debugging). */
  limiter: MachineLimiter | undefined;
}): MachineHost {
  return createQemuHost({
    accel: opts.accel,
    controlDeadlineMs: opts.deadlines.qmpMs,
    ...(opts.volumes ? { volumes: opts.volumes } : {}),
    ...(opts.limiter ? { limiter: opts.limiter } : {}),
  });
}
