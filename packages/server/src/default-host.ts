import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  type Accel,
  createQemuHost,
  defaultJailConfig,
  type JailConfig,
  type MachineHost,
  MachineLimiter,
  type OpenedNetworks,
  type OpenNetworksRequest,
  SandboxNetworks,
  type VolumeImages,
} from "@sandtree/host";
import type { ServerConfigValues } from "./config.js";
import type { Logger } from "./services/observability/logger.js";

/**
 * The host a server runs its machines on when none is given: this machine's QEMU microVMs, in
 * the jail and under the resource limits its settings ask for, their sockets in a short folder
 * of this data dir's, their logs in its `machine-logs`, their disks and layers in the blob store's
 * local directory (`layers`: the layers port stores from there), the volumes they mount in its
 * `volumes`. The one place above the host
 * package that names the implementation and maps its settings (the architecture test allows it
 * here and in config.ts, whose setting names are public). Both are options of the host, so two
 * hosts of one process may differ (bench/isolation.mjs runs one with and one without).
 */
export async function defaultHost(opts: {
  cfg: ServerConfigValues;
  /** serverJail(cfg).jail: the accelerator's trial ran in it too. */
  jail: JailConfig;
  accel: Accel;
  /** Sandboxes have taps (their rate needs `tc`). */
  network: boolean;
  /**
   * Its sandbox networks (defaultHostNetworks, opened before the host is made): they open the
   * host's volume file server with them where this machine can run one (capabilities.volumes).
   */
  networks: SandboxNetworks;
  /** The host's layers directory: the blob store's local one. */
  layersDir: string;
  /** The host's volumes directory: the data dir's `volumes` (its volumes port makes them there). */
  volumesDir: string;
  /** How its volumes are bounded (the server's setting: an image each, or the host's disk only). */
  volumeImages: VolumeImages;
  log: Logger;
}): Promise<MachineHost> {
  const limiter = await openResourceLimits(opts.cfg, opts.network, opts.log);
  if (!opts.volumeImages.bounded) opts.log.warn({ bound: "none" }, "volumes are bounded by the host's disk only, not size_gb");
  return createQemuHost({
    runRoot: runRootFor(opts.cfg.dataDir),
    logRoot: path.join(opts.cfg.dataDir, "machine-logs"),
    layersDir: opts.layersDir,
    volumesDir: opts.volumesDir,
    volumeImages: opts.volumeImages,
    accel: opts.accel,
    controlDeadlineMs: opts.cfg.deadlines.qmpMs,
    jail: opts.jail,
    networks: opts.networks,
    ...(limiter ? { limiter } : {}),
    images: {
      root: path.join(opts.cfg.cacheDir, "images"),
      insecureRegistries: opts.cfg.insecureRegistries,
      defaultRegistry: opts.cfg.defaultRegistry,
    },
  });
}

/** Short per-data-dir directory for machines' Unix sockets (paths are limited to 108 bytes). */
function runRootFor(dataDir: string): string {
  const h = createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10);
  return path.join(tmpdir(), `sandtree-${h}`);
}

/**
 * This machine's sandbox networks, for the default host (its warnings in the server's log).
 * `own`: a worker's own settings, which win over what its control plane asks when it opens them.
 */
export function defaultHostNetworks(log: Logger, own?: { enabled: "auto" | "on" | "off"; subnet?: string }): SandboxNetworks {
  const o = { log: { warn: (f: object, m: string) => log.warn(f, m) } };
  if (!own) return new SandboxNetworks(o);
  const { enabled, ...pool } = own;
  return new (class extends SandboxNetworks {
    override async open(req: OpenNetworksRequest): Promise<OpenedNetworks> {
      if (enabled === "off") return { subnet: null, unavailable: "networking is turned off in this worker's configuration" };
      return super.open({ ...req, ...pool, enabled });
    }
  })(o);
}

/**
 * The jail every QEMU of this server starts in (docs/security.md), and why it is off (the caller
 * logs it loudly with jailOffWarning), or null when it is on.
 */
export function serverJail(cfg: ServerConfigValues): { jail: JailConfig; off: string | null } {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const off =
    cfg.jail === "off"
      ? "SANDTREE_JAIL=off"
      : root
        ? null
        : "the server does not run as root, so it cannot give QEMU its own uid";
  return {
    jail: defaultJailConfig({ enabled: off === null, uidBase: cfg.jailUidBase, uidCount: cfg.jailUidCount }),
    off,
  };
}

/** What the server logs, loudly, when the jail is off. */
export function jailOffWarning(why: string): string {
  return `QEMU JAIL OFF (${why}): every VM runs as this server's user, with no seccomp filter and every capability it has; for debugging only, never in production (docs/security.md)`;
}

/**
 * The host's resource limits (docs/limits.md), or null when the debugging setting turned them
 * off: that is logged as an error at start, since every guest then runs unbounded.
 */
async function openResourceLimits(cfg: ServerConfigValues, network: boolean, log: Logger): Promise<MachineLimiter | null> {
  if (!cfg.resourceLimits) {
    // Loud even with the server's logger off.
    process.stderr.write("sandtree: RESOURCE LIMITS ARE OFF (SANDTREE_RESOURCE_LIMITS=0): debugging only\n");
    log.error(
      { setting: "SANDTREE_RESOURCE_LIMITS=0" },
      "RESOURCE LIMITS ARE OFF: sandboxes run without cgroups or network rates (debugging only; never in production)",
    );
    return null;
  }
  return MachineLimiter.open({ dataDir: cfg.dataDir, network, log: (fields, msg) => log.info(fields, msg) });
}
