import {
  type Accel,
  configureJail,
  createQemuHost,
  type MachineHost,
  type MachineLimiter,
  type VolumeFileServer,
} from "@sandtree/host";
import type { ServerConfigValues, VmDeadlines } from "./config.js";

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

/**
 * Configures the jail every QEMU of this process starts in (docs/security.md). Returns why it is
 * off (the caller logs it loudly), or null when it is on.
 */
export function configureServerJail(cfg: ServerConfigValues): string | null {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const why =
    cfg.jail === "off"
      ? "SANDTREE_JAIL=off"
      : root
        ? null
        : "the server does not run as root, so it cannot give QEMU its own uid";
  configureJail({ enabled: why === null, uidBase: cfg.jailUidBase, uidCount: cfg.jailUidCount });
  return why;
}

/** What the server logs, loudly, when the jail is off. */
export function jailOffWarning(why: string): string {
  return `QEMU JAIL OFF (${why}): every VM runs as this server's user, with no seccomp filter and every capability it has; for debugging only, never in production (docs/security.md)`;
}
