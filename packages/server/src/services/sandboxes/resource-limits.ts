import { MachineLimiter, type MachineRates } from "@sandtree/host";
import type { TeamLimits } from "@sandtree/protocol";
import type { Logger } from "../observability/logger.js";

/**
 * The host's resource limits (docs/limits.md), or null when the debugging setting turned them
 * off: that is logged as an error at start, since every guest then runs unbounded.
 */
export async function openResourceLimits(opts: {
  enabled: boolean;
  dataDir: string;
  network: boolean;
  log: Logger;
}): Promise<MachineLimiter | null> {
  if (!opts.enabled) {
    // Loud even with the server's logger off.
    process.stderr.write("sandtree: RESOURCE LIMITS ARE OFF (SANDTREE_RESOURCE_LIMITS=0): debugging only\n");
    opts.log.error(
      { setting: "SANDTREE_RESOURCE_LIMITS=0" },
      "RESOURCE LIMITS ARE OFF: sandboxes run without cgroups or network rates (debugging only; never in production)",
    );
    return null;
  }
  return MachineLimiter.open({
    dataDir: opts.dataDir,
    network: opts.network,
    log: (fields, msg) => opts.log.info(fields, msg),
  });
}

/** A sandbox's machine rates from its team's limits. */
export function ratesOf(limits: TeamLimits): MachineRates {
  return {
    diskBytesPerSec: limits.sandbox_disk_mbps * 1024 * 1024,
    diskIops: limits.sandbox_disk_iops,
    netMbit: limits.sandbox_net_mbit,
  };
}
