import type Database from "better-sqlite3";
import type { JobPatch, JobRow } from "./rows.js";

// The SQL behind SqliteStore's job methods (the table is created by migration 0003).

/** A database row (SQLite integers for booleans) as a JobRow. */
function jobFromRow(r: Record<string, unknown>): JobRow {
  const { seq: _seq, kill_requested, ...rest } = r;
  return { ...(rest as Omit<JobRow, "kill_requested">), kill_requested: kill_requested === 1 };
}

export function insertJob(db: Database.Database, j: JobRow): void {
  db.prepare(
    `INSERT INTO jobs (id, team_id, sandbox_id, command, status, exit_code, stdout_bytes, stderr_bytes, stdout_tail,
      stderr_tail, wrapper_pid, kill_requested, error_reason, started_at, ended_at)
     VALUES (@id, @team_id, @sandbox_id, @command, @status, @exit_code, @stdout_bytes, @stderr_bytes, @stdout_tail,
      @stderr_tail, @wrapper_pid, @kill_requested, @error_reason, @started_at, @ended_at)`,
  ).run({ ...j, kill_requested: j.kill_requested ? 1 : 0 });
}

export function getJob(db: Database.Database, teamId: string, sandboxId: string, jobId: string): JobRow | undefined {
  const r = db.prepare("SELECT * FROM jobs WHERE id = ? AND team_id = ? AND sandbox_id = ?").get(jobId, teamId, sandboxId);
  return r ? jobFromRow(r as Record<string, unknown>) : undefined;
}

export function listJobs(db: Database.Database, teamId: string, sandboxId: string, limit: number): JobRow[] {
  const rows = db
    .prepare("SELECT * FROM jobs WHERE team_id = ? AND sandbox_id = ? ORDER BY seq DESC LIMIT ?")
    .all(teamId, sandboxId, limit) as Array<Record<string, unknown>>;
  return rows.map(jobFromRow);
}

export function updateJob(db: Database.Database, id: string, patch: JobPatch): void {
  const fields: Record<string, unknown> = { ...patch };
  if (patch.kill_requested !== undefined) fields.kill_requested = patch.kill_requested ? 1 : 0;
  const keys = Object.keys(fields);
  if (keys.length === 0) return;
  db.prepare(`UPDATE jobs SET ${keys.map((k) => `${k} = @${k}`).join(", ")} WHERE id = @__id`).run({ ...fields, __id: id });
}
