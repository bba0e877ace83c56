import type { VolumeState } from "@sandtree/protocol";
import type pg from "pg";
import { all, type Db, one, run, tx } from "./pg-db.js";
import { insertMeterRecords } from "./pg-metering.js";
import {
  LIVE_VOLUME_STATES,
  mountersSql,
  type VolumeMeterRead,
  type VolumeMountRow,
  type VolumeRaw,
  type VolumeRow,
  type VolumeStore,
  type VolumeUsage,
  volumeFromRaw,
  volumeMeterChange,
  volumeMeterSql,
} from "./volume-rows.js";

/**
 * The volume tables on PostgreSQL (see volume-rows.ts). A create locks its team's row (quotas
 * across servers); attaching and beginning a delete lock the volume's row, so a delete never
 * passes a mount made meanwhile.
 */
export class PgVolumes implements VolumeStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly meterNow: () => number,
  ) {}

  createVolume(row: VolumeRow, check: (usage: VolumeUsage) => void): Promise<boolean> {
    return tx(this.pool, async (c) => {
      await run(c, "SELECT id FROM teams WHERE id = $1 FOR UPDATE", [row.team_id]);
      const taken = await one(c, "SELECT 1 FROM volumes WHERE team_id = $1 AND name = $2 AND status <> 'DELETED'", [
        row.team_id,
        row.name,
      ]);
      if (taken) return false;
      check(await usage(c, row.team_id));
      await run(
        c,
        `INSERT INTO volumes (id, team_id, name, status, size_gb, labels, used_bytes, created_at, updated_at, host_id, move_to)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          row.id,
          row.team_id,
          row.name,
          row.status,
          row.size_gb,
          JSON.stringify(row.labels),
          row.used_bytes,
          row.created_at,
          row.updated_at,
          row.host_id,
          row.move_to,
        ],
      );
      await this.meter(c, row.id);
      return true;
    });
  }

  async getVolume(ref: string, teamId?: string): Promise<VolumeRow | undefined> {
    const team = teamId === undefined ? "" : "AND team_id = $2";
    const r = await one<VolumeRaw>(
      this.pool,
      `SELECT * FROM volumes WHERE (id = $1 OR name = $1) ${team} AND status <> 'DELETED' ORDER BY (id = $1) DESC LIMIT 1`,
      teamId === undefined ? [ref] : [ref, teamId],
    );
    return r ? volumeFromRaw(r) : undefined;
  }

  async listVolumes(filter: { teamId?: string; states?: readonly VolumeState[] }): Promise<VolumeRow[]> {
    const states = [...(filter.states ?? LIVE_VOLUME_STATES)];
    const rows =
      filter.teamId === undefined
        ? await all<VolumeRaw>(this.pool, "SELECT * FROM volumes WHERE status = ANY($1) ORDER BY created_at, id", [states])
        : await all<VolumeRaw>(
            this.pool,
            "SELECT * FROM volumes WHERE status = ANY($1) AND team_id = $2 ORDER BY created_at, id",
            [states, filter.teamId],
          );
    return rows.map(volumeFromRaw);
  }

  setVolumeState(id: string, status: VolumeState, from: readonly VolumeState[]): Promise<boolean> {
    return tx(this.pool, async (c) => {
      const n = await run(c, "UPDATE volumes SET status = $1, updated_at = $2 WHERE id = $3 AND status = ANY($4)", [
        status,
        new Date().toISOString(),
        id,
        [...from],
      ]);
      if (n > 0) await this.meter(c, id);
      return n > 0;
    });
  }

  async setVolumeUsed(id: string, bytes: number): Promise<void> {
    await tx(this.pool, async (c) => {
      await run(c, "UPDATE volumes SET used_bytes = $1 WHERE id = $2", [bytes, id]);
      await this.meter(c, id);
    });
  }

  volumeUsage(teamId: string): Promise<VolumeUsage> {
    return usage(this.pool, teamId);
  }

  attachVolumes(sandboxId: string, mounts: readonly VolumeMountRow[]): Promise<boolean> {
    return tx(this.pool, async (c) => {
      for (const m of mounts) {
        const v = await one<{ status: string }>(c, "SELECT status FROM volumes WHERE id = $1 FOR UPDATE", [m.volume_id]);
        if (v?.status !== "READY") return false;
      }
      for (const m of mounts) {
        await run(c, "INSERT INTO volume_mounts (sandbox_id, volume_id, path, read_only) VALUES ($1, $2, $3, $4)", [
          sandboxId,
          m.volume_id,
          m.path,
          m.read_only,
        ]);
      }
      return true;
    });
  }

  mountsOf(sandboxId: string): Promise<VolumeMountRow[]> {
    return all<VolumeMountRow>(this.pool, "SELECT * FROM volume_mounts WHERE sandbox_id = $1 ORDER BY path", [sandboxId]);
  }

  mountsOfSandboxes(sandboxIds: readonly string[]): Promise<Array<VolumeMountRow & { name: string }>> {
    if (sandboxIds.length === 0) return Promise.resolve([]);
    return all<VolumeMountRow & { name: string }>(
      this.pool,
      `SELECT m.*, v.name FROM volume_mounts m JOIN volumes v ON v.id = m.volume_id
       WHERE m.sandbox_id = ANY($1) ORDER BY m.sandbox_id, m.path`,
      [[...sandboxIds]],
    );
  }

  async mountersOf(volumeId: string): Promise<string[]> {
    return (await all<{ sandbox_id: string }>(this.pool, mountersSql("$1"), [volumeId])).map((r) => r.sandbox_id);
  }

  beginDeleteVolume(id: string): Promise<{ changed: boolean; mounters: string[] }> {
    return this.unlessMounted(id, (c) =>
      run(
        c,
        "UPDATE volumes SET status = 'DELETING', updated_at = $1 WHERE id = $2 AND status IN ('CREATING', 'READY', 'DELETING')",
        [new Date().toISOString(), id],
      ),
    );
  }

  beginMoveVolume(id: string, to: string): Promise<{ changed: boolean; mounters: string[] }> {
    return this.unlessMounted(id, (c) =>
      run(
        c,
        `UPDATE volumes SET status = 'MOVING', move_to = $1, updated_at = $2
         WHERE id = $3 AND (status = 'READY' OR (status = 'MOVING' AND move_to = $1))`,
        [to, new Date().toISOString(), id],
      ),
    );
  }

  /**
   * In one transaction holding the volume's row (a mount made meanwhile waits): nothing while a
   * sandbox mounts it, else `update` (the rows it changed), metered when it changed one.
   */
  private unlessMounted(id: string, update: (c: Db) => Promise<number>): Promise<{ changed: boolean; mounters: string[] }> {
    return tx(this.pool, async (c) => {
      await run(c, "SELECT id FROM volumes WHERE id = $1 FOR UPDATE", [id]);
      const mounters = (await all<{ sandbox_id: string }>(c, mountersSql("$1"), [id])).map((r) => r.sandbox_id);
      if (mounters.length > 0) return { changed: false, mounters };
      const changed = (await update(c)) > 0;
      if (changed) await this.meter(c, id);
      return { changed, mounters };
    });
  }

  endMoveVolume(id: string, home: string | null): Promise<boolean> {
    return tx(this.pool, async (c) => {
      const n = await run(
        c,
        "UPDATE volumes SET status = 'READY', host_id = $1, move_to = NULL, updated_at = $2 WHERE id = $3 AND status = 'MOVING'",
        [home, new Date().toISOString(), id],
      );
      if (n > 0) await this.meter(c, id);
      return n > 0;
    });
  }

  /** Closes the volume's open record unless it still holds; opens the next while it is billed (volume-rows.ts). */
  private async meter(c: Db, id: string): Promise<void> {
    const sql = volumeMeterSql("$1");
    const read = { volume: await one(c, sql.volume, [id]), open: await one(c, sql.open, [id]) } as VolumeMeterRead;
    const { close, next } = volumeMeterChange(read, this.meterNow());
    if (close) await run(c, "UPDATE meter_records SET end_ms = $1 WHERE id = $2", [close.endMs, close.id]);
    if (next) await insertMeterRecords(c, [next]);
  }
}

async function usage(db: Db, teamId: string): Promise<VolumeUsage> {
  const r = await one<VolumeUsage>(
    db,
    "SELECT COUNT(*)::int AS count, COALESCE(SUM(size_gb), 0)::int AS size_gb FROM volumes WHERE team_id = $1 AND status <> 'DELETED'",
    [teamId],
  );
  return r ?? { count: 0, size_gb: 0 };
}
