import { all, type Db, one, run, updateSql, wholeRows } from "./pg-db.js";
import type { JobPatch, JobRow } from "./rows.js";

// The SQL behind PgStore's job methods.

const TABLE = wholeRows<JobRow>("jobs", [
  "id",
  "team_id",
  "sandbox_id",
  "command",
  "status",
  "exit_code",
  "stdout_bytes",
  "stderr_bytes",
  "stdout_tail",
  "stderr_tail",
  "wrapper_pid",
  "kill_requested",
  "error_reason",
  "started_at",
  "ended_at",
]);
const SELECT = TABLE.select;

export const insertJob = TABLE.insert;

export function getJob(db: Db, teamId: string, sandboxId: string, jobId: string): Promise<JobRow | undefined> {
  return one<JobRow>(db, `${SELECT} WHERE id = $1 AND team_id = $2 AND sandbox_id = $3`, [jobId, teamId, sandboxId]);
}

export function listJobs(db: Db, teamId: string, sandboxId: string, limit: number): Promise<JobRow[]> {
  return all<JobRow>(db, `${SELECT} WHERE team_id = $1 AND sandbox_id = $2 ORDER BY seq DESC LIMIT $3`, [
    teamId,
    sandboxId,
    limit,
  ]);
}

export async function updateJob(db: Db, id: string, patch: JobPatch): Promise<void> {
  if (Object.keys(patch).length === 0) return;
  await run(db, ...updateSql("jobs", patch as Record<string, unknown>, id));
}
