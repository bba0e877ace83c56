import type { CheckpointState } from "@sandtree/protocol";
import type Database from "better-sqlite3";
import type { CheckpointPatch, CheckpointRow } from "./rows.js";
import { SqliteWhere, sqliteUpdate } from "./sqlite-sql.js";

// The SQL behind SqliteStore's checkpoint methods.

export const CHECKPOINT_MIGRATION = `
  CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
    team_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, parent_id TEXT, state TEXT NOT NULL,
    depth INTEGER NOT NULL, image TEXT NOT NULL, image_digest TEXT, base_path TEXT NOT NULL,
    disk_size_bytes INTEGER NOT NULL, stored_bytes INTEGER NOT NULL DEFAULT 0, sha256 TEXT,
    blob_key TEXT, error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, expires_at TEXT);
  CREATE INDEX checkpoints_team ON checkpoints(team_id, seq);
  CREATE INDEX checkpoints_sandbox ON checkpoints(sandbox_id, seq);
  CREATE INDEX checkpoints_parent ON checkpoints(parent_id);
  ALTER TABLE sandboxes ADD COLUMN source_checkpoint_id TEXT;
  ALTER TABLE sandboxes ADD COLUMN head_checkpoint_id TEXT;`;

/**
 * A checkpoint's image base by name (ResolvedImage.base), no longer the host's path: a path into an
 * image store (`.../blobs/sha256/<hex>/base.<format>`) becomes `sha256:<hex>`; any other stays
 * (ensureBase resolves the image again, never giving a path to a host).
 */
export const CHECKPOINT_BASE_NAMES_MIGRATION = `
  ALTER TABLE checkpoints RENAME COLUMN base_path TO base;
  UPDATE checkpoints SET base = 'sha256:' || substr(base, instr(base, '/blobs/sha256/') + 14, 64)
    WHERE base GLOB '*/blobs/sha256/${"[0-9a-f]".repeat(64)}/base.*';`;

const COLUMNS = `id, team_id, sandbox_id, parent_id, state, depth, image, image_digest, base, disk_size_bytes,
  stored_bytes, sha256, blob_key, error, created_at, updated_at, expires_at, mem_key, mem_sha256, cpu_cores, memory_mb, machine`;

export const CHECKPOINT_MEMORY_MIGRATION = `
  ALTER TABLE checkpoints ADD COLUMN mem_key TEXT;
  ALTER TABLE checkpoints ADD COLUMN mem_sha256 TEXT;
  ALTER TABLE checkpoints ADD COLUMN cpu_cores INTEGER;
  ALTER TABLE checkpoints ADD COLUMN memory_mb INTEGER;`;

export function insertCheckpoint(db: Database.Database, c: CheckpointRow): void {
  db.prepare(
    `INSERT INTO checkpoints (${COLUMNS}) VALUES (@id, @team_id, @sandbox_id, @parent_id, @state, @depth, @image,
      @image_digest, @base, @disk_size_bytes, @stored_bytes, @sha256, @blob_key, @error, @created_at, @updated_at, @expires_at,
      @mem_key, @mem_sha256, @cpu_cores, @memory_mb, @machine)`,
  ).run({ ...c, machine: c.machine ?? null });
}

export function getCheckpoint(db: Database.Database, id: string, teamId?: string): CheckpointRow | undefined {
  return (
    teamId === undefined
      ? db.prepare(`SELECT ${COLUMNS} FROM checkpoints WHERE id = ?`).get(id)
      : db.prepare(`SELECT ${COLUMNS} FROM checkpoints WHERE id = ? AND team_id = ?`).get(id, teamId)
  ) as CheckpointRow | undefined;
}

export function listCheckpoints(
  db: Database.Database,
  filter: { teamId?: string; sandboxId?: string; states?: readonly CheckpointState[] },
): CheckpointRow[] {
  const where = new SqliteWhere();
  if (filter.teamId !== undefined) where.and("team_id = ?", filter.teamId);
  if (filter.sandboxId !== undefined) where.and("sandbox_id = ?", filter.sandboxId);
  if (filter.states) where.in("state", filter.states);
  return db.prepare(`SELECT ${COLUMNS} FROM checkpoints ${where.sql} ORDER BY seq`).all(...where.params) as CheckpointRow[];
}

export function updateCheckpoint(
  db: Database.Database,
  id: string,
  patch: CheckpointPatch,
  from?: readonly CheckpointState[],
): boolean {
  const fields = { ...patch, updated_at: new Date().toISOString() };
  const { sql, params } = sqliteUpdate("checkpoints", fields, id, from && { column: "state", from });
  return db.prepare(sql).run(params).changes > 0;
}

export function deleteCheckpointRow(db: Database.Database, id: string): void {
  db.prepare("DELETE FROM checkpoints WHERE id = ?").run(id);
}

/** Head checkpoints of active sandboxes: their running disks read every layer of those chains. */
export function checkpointsInUse(db: Database.Database): string[] {
  return (
    db
      .prepare(
        "SELECT DISTINCT head_checkpoint_id AS id FROM sandboxes WHERE head_checkpoint_id IS NOT NULL AND status IN ('PENDING', 'PROVISIONING', 'RUNNING', 'PAUSED')",
      )
      .all() as Array<{ id: string }>
  ).map((r) => r.id);
}
