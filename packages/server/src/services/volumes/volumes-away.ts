import type { VolumeRow } from "../../store/volume-rows.js";

/**
 * A fleet's volumes that live on a worker (`host_id` set): the control plane brings one home
 * before its file API touches it, and drops the worker's copy when it is deleted (VolumeMoves).
 */
export interface VolumesAway {
  /** The volume moved back to this host (VOLUME_IN_USE_ELSEWHERE while a sandbox mounts it there). */
  bringHome(row: VolumeRow): Promise<VolumeRow>;
  /** Removes the worker's copy of a volume being deleted, and its copy in the object store. */
  dropAway(row: VolumeRow): Promise<void>;
}
