import type { VolumeState } from "@sandtree/protocol";
import type Database from "better-sqlite3";
import { insertMeterRecord } from "./sqlite-metering.js";
import { SqliteWhere } from "./sqlite-sql.js";
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

/** The volume tables on SQLite (see volume-rows.ts); meter records commit with each change. */
export class SqliteVolumes implements VolumeStore {
  constructor(
    private readonly db: Database.Database,
    private readonly meterNow: () => number,
  ) {}

  async createVolume(row: VolumeRow, check: (usage: VolumeUsage) => void): Promise<boolean> {
    return this.db.transaction(() => {
      const taken = this.db
        .prepare("SELECT 1 FROM volumes WHERE team_id = ? AND name = ? AND status <> 'DELETED'")
        .get(row.team_id, row.name);
      if (taken) return false;
      check(this.usageNow(row.team_id));
      this.db
        .prepare(
          `INSERT INTO volumes (id, team_id, name, status, size_gb, labels, used_bytes, created_at, updated_at, host_id, move_to)
           VALUES (@id, @team_id, @name, @status, @size_gb, @labels, @used_bytes, @created_at, @updated_at, @host_id, @move_to)`,
        )
        .run({ ...row, labels: JSON.stringify(row.labels) });
      this.meter(row.id);
      return true;
    })();
  }

  async getVolume(ref: string, teamId?: string): Promise<VolumeRow | undefined> {
    const team = teamId === undefined ? "" : "AND team_id = @teamId";
    const r = this.db
      .prepare(
        `SELECT * FROM volumes WHERE (id = @ref OR name = @ref) ${team} AND status <> 'DELETED' ORDER BY id = @ref DESC LIMIT 1`,
      )
      .get({ ref, ...(teamId === undefined ? {} : { teamId }) }) as VolumeRaw | undefined;
    return r ? volumeFromRaw(r) : undefined;
  }

  async listVolumes(filter: { teamId?: string; states?: readonly VolumeState[] }): Promise<VolumeRow[]> {
    const where = new SqliteWhere().in("status", filter.states ?? LIVE_VOLUME_STATES);
    if (filter.teamId !== undefined) where.and("team_id = ?", filter.teamId);
    const rows = this.db.prepare(`SELECT * FROM volumes ${where.sql} ORDER BY created_at, id`).all(...where.params);
    return (rows as VolumeRaw[]).map(volumeFromRaw);
  }

  async setVolumeState(id: string, status: VolumeState, from: readonly VolumeState[]): Promise<boolean> {
    return this.db.transaction(() => {
      const applied =
        this.db
          .prepare(`UPDATE volumes SET status = ?, updated_at = ? WHERE id = ? AND status IN (${from.map(() => "?").join(",")})`)
          .run(status, new Date().toISOString(), id, ...from).changes > 0;
      if (applied) this.meter(id);
      return applied;
    })();
  }

  async setVolumeUsed(id: string, bytes: number): Promise<void> {
    this.db.transaction(() => {
      this.db.prepare("UPDATE volumes SET used_bytes = ? WHERE id = ?").run(bytes, id);
      this.meter(id);
    })();
  }

  async volumeUsage(teamId: string): Promise<VolumeUsage> {
    return this.usageNow(teamId);
  }

  private usageNow(teamId: string): VolumeUsage {
    return this.db
      .prepare(
        "SELECT COUNT(*) AS count, COALESCE(SUM(size_gb), 0) AS size_gb FROM volumes WHERE team_id = ? AND status <> 'DELETED'",
      )
      .get(teamId) as VolumeUsage;
  }

  async attachVolumes(sandboxId: string, mounts: readonly VolumeMountRow[]): Promise<boolean> {
    return this.db.transaction(() => {
      for (const m of mounts) {
        if (!this.db.prepare("SELECT 1 FROM volumes WHERE id = ? AND status = 'READY'").get(m.volume_id)) return false;
      }
      const ins = this.db.prepare("INSERT INTO volume_mounts (sandbox_id, volume_id, path, read_only) VALUES (?, ?, ?, ?)");
      for (const m of mounts) ins.run(sandboxId, m.volume_id, m.path, m.read_only ? 1 : 0);
      return true;
    })();
  }

  async mountsOf(sandboxId: string): Promise<VolumeMountRow[]> {
    const rows = this.db.prepare("SELECT * FROM volume_mounts WHERE sandbox_id = ? ORDER BY path").all(sandboxId) as Array<
      Omit<VolumeMountRow, "read_only"> & { read_only: number }
    >;
    return rows.map((r) => ({ ...r, read_only: r.read_only === 1 }));
  }

  async mountsOfSandboxes(sandboxIds: readonly string[]): Promise<Array<VolumeMountRow & { name: string }>> {
    if (sandboxIds.length === 0) return [];
    const rows = this.db
      .prepare(
        `SELECT m.*, v.name FROM volume_mounts m JOIN volumes v ON v.id = m.volume_id
         WHERE m.sandbox_id IN (${sandboxIds.map(() => "?").join(",")}) ORDER BY m.sandbox_id, m.path`,
      )
      .all(...sandboxIds) as Array<Omit<VolumeMountRow, "read_only"> & { read_only: number; name: string }>;
    return rows.map((r) => ({ ...r, read_only: r.read_only === 1 }));
  }

  async mountersOf(volumeId: string): Promise<string[]> {
    return this.mounters(volumeId);
  }

  async beginDeleteVolume(id: string): Promise<{ changed: boolean; mounters: string[] }> {
    return this.unlessMounted(id, () =>
      this.db
        .prepare(
          "UPDATE volumes SET status = 'DELETING', updated_at = ? WHERE id = ? AND status IN ('CREATING', 'READY', 'DELETING')",
        )
        .run(new Date().toISOString(), id),
    );
  }

  async beginMoveVolume(id: string, to: string): Promise<{ changed: boolean; mounters: string[] }> {
    return this.unlessMounted(id, () =>
      this.db
        .prepare(
          `UPDATE volumes SET status = 'MOVING', move_to = @to, updated_at = @now
           WHERE id = @id AND (status = 'READY' OR (status = 'MOVING' AND move_to = @to))`,
        )
        .run({ id, to, now: new Date().toISOString() }),
    );
  }

  private mounters(volumeId: string): string[] {
    return (this.db.prepare(mountersSql("?")).all(volumeId) as Array<{ sandbox_id: string }>).map((r) => r.sandbox_id);
  }

  /** In one transaction: nothing while a sandbox mounts the volume, else `update`, metered when it changed a row. */
  private unlessMounted(id: string, update: () => { changes: number }): { changed: boolean; mounters: string[] } {
    return this.db.transaction(() => {
      const mounters = this.mounters(id);
      if (mounters.length > 0) return { changed: false, mounters };
      const changed = update().changes > 0;
      if (changed) this.meter(id);
      return { changed, mounters };
    })();
  }

  async endMoveVolume(id: string, home: string | null): Promise<boolean> {
    return this.db.transaction(() => {
      const applied =
        this.db
          .prepare(
            "UPDATE volumes SET status = 'READY', host_id = ?, move_to = NULL, updated_at = ? WHERE id = ? AND status = 'MOVING'",
          )
          .run(home, new Date().toISOString(), id).changes > 0;
      if (applied) this.meter(id);
      return applied;
    })();
  }

  /** Closes the volume's open record unless it still holds; opens the next while it is billed (volume-rows.ts). */
  private meter(id: string): void {
    const sql = volumeMeterSql("?");
    const read = { volume: this.db.prepare(sql.volume).get(id), open: this.db.prepare(sql.open).get(id) } as VolumeMeterRead;
    const { close, next } = volumeMeterChange(read, this.meterNow());
    if (close) this.db.prepare("UPDATE meter_records SET end_ms = ? WHERE id = ?").run(close.endMs, close.id);
    if (next) insertMeterRecord(this.db, next);
  }
}
