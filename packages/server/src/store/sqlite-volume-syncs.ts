import type Database from "better-sqlite3";
import { type VolumeRaw, type VolumeRow, volumeFromRaw } from "./volume-rows.js";
import {
  STALE_COPIES_SQL,
  SYNC_CANDIDATES_SQL,
  type SyncCandidate,
  syncCandidatesOf,
  type VolumeSync,
  type VolumeSyncStore,
} from "./volume-sync-rows.js";

/** Volumes' copies in the object store and their lost homes, on SQLite (see volume-sync-rows.ts). */
export class SqliteVolumeSyncs implements VolumeSyncStore {
  constructor(private readonly db: Database.Database) {}

  async syncCandidates(): Promise<SyncCandidate[]> {
    return syncCandidatesOf(this.db.prepare(SYNC_CANDIDATES_SQL).all());
  }

  async recordSync(id: string, sync: VolumeSync): Promise<string | null> {
    return this.db.transaction(() => {
      const was = this.db.prepare("SELECT sync_key, synced_at FROM volumes WHERE id = ? AND status <> 'DELETED'").get(id) as
        | { sync_key: string | null; synced_at: string | null }
        | undefined;
      if (!was || (was.synced_at !== null && was.synced_at >= sync.at)) return sync.key;
      this.db
        .prepare("UPDATE volumes SET sync_key = ?, sync_sha256 = ?, synced_bytes = ?, synced_at = ? WHERE id = ?")
        .run(sync.key, sync.sha256, sync.bytes, sync.at, id);
      return was.sync_key;
    })();
  }

  async markHomeLost(hostId: string, at: string): Promise<VolumeRow[]> {
    return this.db.transaction(() => {
      this.db
        .prepare(
          "UPDATE volumes SET home_lost_at = ? WHERE host_id = ? AND status IN ('READY', 'MOVING') AND home_lost_at IS NULL",
        )
        .run(at, hostId);
      const rows = this.db.prepare("SELECT * FROM volumes WHERE host_id = ? AND home_lost_at IS NOT NULL").all(hostId);
      return (rows as VolumeRaw[]).map(volumeFromRaw);
    })();
  }

  async homeLost(): Promise<VolumeRow[]> {
    const rows = this.db.prepare("SELECT * FROM volumes WHERE home_lost_at IS NOT NULL AND status <> 'DELETED'").all();
    return (rows as VolumeRaw[]).map(volumeFromRaw);
  }

  async clearHomeLost(id: string, hostId: string): Promise<boolean> {
    return (
      this.db
        .prepare(
          "UPDATE volumes SET home_lost_at = NULL WHERE id = ? AND host_id = ? AND status IN ('READY', 'MOVING') AND home_lost_at IS NOT NULL",
        )
        .run(id, hostId).changes > 0
    );
  }

  async endRestore(id: string, home: string | null, lostHost: string): Promise<boolean> {
    return this.db.transaction(() => {
      const applied =
        this.db
          .prepare(
            `UPDATE volumes SET status = 'READY', host_id = ?, move_to = NULL, home_lost_at = NULL,
             restored_as_of = synced_at, updated_at = ? WHERE id = ? AND status = 'MOVING'`,
          )
          .run(home, new Date().toISOString(), id).changes > 0;
      if (applied)
        this.db.prepare("INSERT OR IGNORE INTO volume_stale_copies (volume_id, host_id) VALUES (?, ?)").run(id, lostHost);
      return applied;
    })();
  }

  async recordStaleCopy(volumeId: string, hostId: string): Promise<void> {
    this.db.prepare("INSERT OR IGNORE INTO volume_stale_copies (volume_id, host_id) VALUES (?, ?)").run(volumeId, hostId);
  }

  async staleCopies(): Promise<Array<{ volume_id: string; host_id: string }>> {
    return this.db.prepare(STALE_COPIES_SQL).all() as Array<{ volume_id: string; host_id: string }>;
  }

  async forgetStaleCopy(volumeId: string, hostId: string): Promise<void> {
    this.db.prepare("DELETE FROM volume_stale_copies WHERE volume_id = ? AND host_id = ?").run(volumeId, hostId);
  }
}
