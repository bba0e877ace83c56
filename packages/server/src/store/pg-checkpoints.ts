import type { CheckpointState } from "@sandtree/protocol";
import { all, type Db, one, run, updateSql, wholeRows } from "./pg-db.js";
import type { CheckpointPatch, CheckpointRow } from "./rows.js";

// The SQL behind PgStore's checkpoint methods (metering of their changes: pg-metering.ts).

/** SQLite's CHECKPOINT_BASE_NAMES_MIGRATION: a path into an image store becomes the base's name. */
export const PG_CHECKPOINT_BASE_NAMES_MIGRATION = `
  ALTER TABLE checkpoints RENAME COLUMN base_path TO base;
  UPDATE checkpoints SET base = 'sha256:' || substring(base from '/blobs/sha256/([0-9a-f]{64})/base\\.[^/]+$')
    WHERE base ~ '/blobs/sha256/[0-9a-f]{64}/base\\.[^/]+$';`;

const TABLE = wholeRows<CheckpointRow>("checkpoints", [
  "id",
  "team_id",
  "sandbox_id",
  "parent_id",
  "state",
  "depth",
  "image",
  "image_digest",
  "base",
  "disk_size_bytes",
  "stored_bytes",
  "sha256",
  "blob_key",
  "error",
  "created_at",
  "updated_at",
  "expires_at",
  "mem_key",
  "mem_sha256",
  "cpu_cores",
  "memory_mb",
  "machine",
]);
const SELECT = TABLE.select;

export const insertCheckpoint = TABLE.insert;

export function getCheckpoint(db: Db, id: string, teamId?: string): Promise<CheckpointRow | undefined> {
  return teamId === undefined
    ? one<CheckpointRow>(db, `${SELECT} WHERE id = $1`, [id])
    : one<CheckpointRow>(db, `${SELECT} WHERE id = $1 AND team_id = $2`, [id, teamId]);
}

export function listCheckpoints(
  db: Db,
  filter: { teamId?: string; sandboxId?: string; states?: readonly CheckpointState[] },
): Promise<CheckpointRow[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.teamId !== undefined) {
    params.push(filter.teamId);
    where.push(`team_id = $${params.length}`);
  }
  if (filter.sandboxId !== undefined) {
    params.push(filter.sandboxId);
    where.push(`sandbox_id = $${params.length}`);
  }
  if (filter.states) {
    params.push([...filter.states]);
    where.push(`state = ANY($${params.length})`);
  }
  return all<CheckpointRow>(db, `${SELECT} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq`, params);
}

/** Conditional on the current state being one of `from` (if given); true when a row changed. */
export async function updateCheckpoint(
  db: Db,
  id: string,
  patch: CheckpointPatch,
  from?: readonly CheckpointState[],
): Promise<boolean> {
  const fields = { ...patch, updated_at: new Date().toISOString() } as Record<string, unknown>;
  return (await run(db, ...updateSql("checkpoints", fields, id, from && { column: "state", from }))) > 0;
}

export async function deleteCheckpointRow(db: Db, id: string): Promise<void> {
  await run(db, "DELETE FROM checkpoints WHERE id = $1", [id]);
}

/** Head checkpoints of active sandboxes: their running disks read every layer of those chains. */
export async function checkpointsInUse(db: Db): Promise<string[]> {
  const rows = await all<{ id: string }>(
    db,
    `SELECT DISTINCT head_checkpoint_id AS id FROM sandboxes
     WHERE head_checkpoint_id IS NOT NULL AND status IN ('PENDING', 'PROVISIONING', 'RUNNING', 'PAUSED')`,
  );
  return rows.map((r) => r.id);
}
