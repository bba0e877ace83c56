import { type VolumeRaw, type VolumeRow, volumeFromRaw } from "./volume-rows.js";

/** A volume's copy in the object store: the archive (its key and sha256), its size, and when it was taken. */
export interface VolumeSync {
  key: string;
  sha256: string;
  bytes: number;
  at: string;
}

/** A volume the sync loop looks at: whether a sandbox not ended mounts it, and when the last one that did ended. */
export type SyncCandidate = VolumeRow & { mounted: boolean; last_unmount_at: string | null };

/** A row of SYNC_CANDIDATES_SQL as either driver gives it (PostgreSQL's COUNT is a bigint: a string). */
type SyncCandidateRaw = VolumeRaw & { mount_count: number | string; last_unmount_at: string | null };

/** The volumes the rows of SYNC_CANDIDATES_SQL name, with their mounts' state. */
export function syncCandidatesOf(rows: readonly unknown[]): SyncCandidate[] {
  return (rows as SyncCandidateRaw[]).map(({ mount_count, ...r }) => ({
    ...volumeFromRaw(r),
    mounted: Number(mount_count) > 0,
    last_unmount_at: r.last_unmount_at,
  }));
}

/**
 * The sync and recovery side of the `volumes` table (docs/fleet.md, "Volumes on workers"): each
 * worker-homed volume's last copy in the object store, the home lost before it was brought
 * back, and the copies a restore elsewhere superseded (table `volume_stale_copies`).
 */
export interface VolumeSyncStore {
  /** READY volumes whose home is a worker that is not lost, with their mounts' state. */
  syncCandidates(): Promise<SyncCandidate[]>;
  /**
   * Records `sync` as the volume's copy when it is newer than the one recorded. Answers the key of
   * the copy it replaced (to delete), or, when not newer, `sync.key` itself (the one to delete).
   */
  recordSync(id: string, sync: VolumeSync): Promise<string | null>;
  /** Marks the volumes whose home is `hostId` (READY or MOVING) as having lost it; answers them. */
  markHomeLost(hostId: string, at: string): Promise<VolumeRow[]>;
  /** Volumes whose home was lost and that were not brought back (any state but DELETED). */
  homeLost(): Promise<VolumeRow[]>;
  /** The home came back before the volume was brought back elsewhere: its copy there holds again (READY or MOVING). */
  clearHomeLost(id: string, hostId: string): Promise<boolean>;
  /**
   * MOVING to READY at `home`, brought back from its copy (restored_as_of = its synced_at, home no
   * longer lost), the lost host's copy recorded as stale, in one transaction.
   */
  endRestore(id: string, home: string | null, lostHost: string): Promise<boolean>;
  /** Records that host `hostId` holds a copy of the volume that is no longer its (dropped when that host is back). */
  recordStaleCopy(volumeId: string, hostId: string): Promise<void>;
  /** Copies superseded by a restore elsewhere, on hosts that are not LOST now (to drop). */
  staleCopies(): Promise<Array<{ volume_id: string; host_id: string }>>;
  /** A stale copy dropped. */
  forgetStaleCopy(volumeId: string, hostId: string): Promise<void>;
}

const ENDED = "('TERMINATED', 'ERROR', 'TIMEOUT')";

/** syncCandidates' query for both backends (`$LOST` is the hosts' LOST state literal). */
export const SYNC_CANDIDATES_SQL = `
  SELECT v.*,
    (SELECT COUNT(*) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id
      WHERE m.volume_id = v.id AND s.status NOT IN ${ENDED}) AS mount_count,
    (SELECT MAX(s.updated_at) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id
      WHERE m.volume_id = v.id AND s.status IN ${ENDED}) AS last_unmount_at
  FROM volumes v JOIN hosts h ON h.id = v.host_id
  WHERE v.status = 'READY' AND v.home_lost_at IS NULL AND h.state <> 'LOST'
  ORDER BY v.created_at, v.id`;

/** staleCopies' query for both backends. */
export const STALE_COPIES_SQL = `
  SELECT c.volume_id, c.host_id FROM volume_stale_copies c JOIN hosts h ON h.id = c.host_id
  WHERE h.state <> 'LOST' ORDER BY c.volume_id, c.host_id`;
