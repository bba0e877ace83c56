import { SandtreeError, type TeamLimits } from "@sandtree/protocol";
import type { VolumeUsage } from "../../store/volume-rows.js";

/** A new volume of `sizeGb` against the team's limits (run inside the store's insert transaction). */
export function quotaCheck(u: VolumeUsage, sizeGb: number, l: TeamLimits): void {
  if (u.count + 1 > l.max_volumes) {
    throw new SandtreeError("QUOTA_VOLUMES", `team quota exceeded: volumes ${u.count} + 1 requested > limit ${l.max_volumes}`, {
      limit: l.max_volumes,
      used: u.count,
      requested: 1,
    });
  }
  if (u.size_gb + sizeGb > l.max_volume_gb) {
    throw new SandtreeError(
      "QUOTA_VOLUME_STORAGE",
      `team quota exceeded: volume GiB ${u.size_gb} in use + ${sizeGb} requested > limit ${l.max_volume_gb}`,
      { limit: l.max_volume_gb, used: u.size_gb, requested: sizeGb },
    );
  }
}
