import type { UsageAmounts } from "@sandtree/protocol";

// The amounts of metering (the database adds records up: store/usage-sums.ts, priced in usage-pricing.ts).

/** The upload charge of a checkpoint turning DURABLE: one day of its storage. */
export const UPLOAD_HOURS = 24;

export function zeroAmounts(): UsageAmounts {
  return {
    vcpu_seconds: 0,
    memory_gib_seconds: 0,
    disk_gib_seconds: 0,
    checkpoint_gib_hours: 0,
    cost_usd: 0,
    volume_gib_hours: 0,
  };
}

export function addAmounts(into: UsageAmounts, a: UsageAmounts): void {
  into.vcpu_seconds += a.vcpu_seconds;
  into.memory_gib_seconds += a.memory_gib_seconds;
  into.disk_gib_seconds += a.disk_gib_seconds;
  into.checkpoint_gib_hours += a.checkpoint_gib_hours;
  into.cost_usd += a.cost_usd;
  into.volume_gib_hours += a.volume_gib_hours;
}
