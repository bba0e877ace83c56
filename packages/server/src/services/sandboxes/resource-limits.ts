import type { MachineRates } from "@sandtree/host";
import type { TeamLimits } from "@sandtree/protocol";

/** A sandbox's machine rates from its team's limits. */
export function ratesOf(limits: TeamLimits): MachineRates {
  return {
    diskBytesPerSec: limits.sandbox_disk_mbps * 1024 * 1024,
    diskIops: limits.sandbox_disk_iops,
    netMbit: limits.sandbox_net_mbit,
  };
}
