import type pg from "pg";
import { all, one, run, tx } from "./pg-db.js";
import { type VolumeRaw, type VolumeRow, volumeFromRaw } from "./volume-rows.js";
import {
  STALE_COPIES_SQL,
  SYNC_CANDIDATES_SQL,
  type SyncCandidate,
  syncCandidatesOf,
  type VolumeSync,
  type VolumeSyncStore,
} from "./volume-sync-rows.js";

/** Volumes' copies in the object store and their lost homes, on PostgreSQL (see volume-sync-rows.ts). */
export class PgVolumeSyncs implements VolumeSyncStore {
  constructor(private readonly pool: pg.Pool) {}

  async syncCandidates(): Promise<SyncCandidate[]> {
    return syncCandidatesOf(await all(this.pool, SYNC_CANDIDATES_SQL, []));
  }

  recordSync(id: string, sync: VolumeSync): Promise<string | null> {
    return tx(this.pool, async (c) => {
      const was = await one<{ sync_key: string | null; synced_at: string | null }>(
        c,
        "SELECT sync_key, synced_at FROM volumes WHERE id = $1 AND status <> 'DELETED' FOR UPDATE",
        [id],
      );
      if (!was || (was.synced_at !== null && was.synced_at >= sync.at)) return sync.key;
      await run(c, "UPDATE volumes SET sync_key = $1, sync_sha256 = $2, synced_bytes = $3, synced_at = $4 WHERE id = $5", [
        sync.key,
        sync.sha256,
        sync.bytes,
        sync.at,
        id,
      ]);
      return was.sync_key;
    });
  }

  markHomeLost(hostId: string, at: string): Promise<VolumeRow[]> {
    return tx(this.pool, async (c) => {
      await run(
        c,
        "UPDATE volumes SET home_lost_at = $1 WHERE host_id = $2 AND status IN ('READY', 'MOVING') AND home_lost_at IS NULL",
        [at, hostId],
      );
      return (await all<VolumeRaw>(c, "SELECT * FROM volumes WHERE host_id = $1 AND home_lost_at IS NOT NULL", [hostId])).map(
        volumeFromRaw,
      );
    });
  }

  async homeLost(): Promise<VolumeRow[]> {
    return (
      await all<VolumeRaw>(this.pool, "SELECT * FROM volumes WHERE home_lost_at IS NOT NULL AND status <> 'DELETED'", [])
    ).map(volumeFromRaw);
  }

  async clearHomeLost(id: string, hostId: string): Promise<boolean> {
    const n = await run(
      this.pool,
      "UPDATE volumes SET home_lost_at = NULL WHERE id = $1 AND host_id = $2 AND status IN ('READY', 'MOVING') AND home_lost_at IS NOT NULL",
      [id, hostId],
    );
    return n > 0;
  }

  endRestore(id: string, home: string | null, lostHost: string): Promise<boolean> {
    return tx(this.pool, async (c) => {
      const n = await run(
        c,
        `UPDATE volumes SET status = 'READY', host_id = $1, move_to = NULL, home_lost_at = NULL,
         restored_as_of = synced_at, updated_at = $2 WHERE id = $3 AND status = 'MOVING'`,
        [home, new Date().toISOString(), id],
      );
      if (n > 0)
        await run(c, "INSERT INTO volume_stale_copies (volume_id, host_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [
          id,
          lostHost,
        ]);
      return n > 0;
    });
  }

  async recordStaleCopy(volumeId: string, hostId: string): Promise<void> {
    await run(this.pool, "INSERT INTO volume_stale_copies (volume_id, host_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [
      volumeId,
      hostId,
    ]);
  }

  staleCopies(): Promise<Array<{ volume_id: string; host_id: string }>> {
    return all<{ volume_id: string; host_id: string }>(this.pool, STALE_COPIES_SQL, []);
  }

  async forgetStaleCopy(volumeId: string, hostId: string): Promise<void> {
    await run(this.pool, "DELETE FROM volume_stale_copies WHERE volume_id = $1 AND host_id = $2", [volumeId, hostId]);
  }
}
