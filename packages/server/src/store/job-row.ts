import type { JobStatus } from "@sandtree/protocol";

/** A background job as persisted; live state (output sizes, exit) is read from the guest. */
export interface JobRow {
  id: string;
  team_id: string;
  sandbox_id: string;
  command: string;
  status: JobStatus;
  exit_code: number | null;
  stdout_bytes: number;
  stderr_bytes: number;
  /** PID of the in-guest wrapper that waits for the job and writes its exit status. */
  wrapper_pid: number | null;
  kill_requested: boolean;
  error_reason: string | null;
  started_at: string;
  ended_at: string | null;
}

export type JobPatch = Partial<Omit<JobRow, "id" | "team_id" | "sandbox_id" | "command" | "started_at">>;

/** The job part of the persistence seam (implemented by every Store backend). */
export interface JobStore {
  insertJob(j: JobRow): void;
  getJob(teamId: string, sandboxId: string, jobId: string): JobRow | undefined;
  listJobs(teamId: string, sandboxId: string, limit: number): JobRow[];
  updateJob(id: string, patch: JobPatch): void;
  /** Records activity without bumping updated_at (idle timeouts). */
  touchSandbox(id: string, at: string): void;
}

/** A database row (SQLite integers for booleans) as a JobRow. */
export function jobFromRow(r: Record<string, unknown>): JobRow {
  const { seq: _seq, kill_requested, ...rest } = r;
  return { ...(rest as Omit<JobRow, "kill_requested">), kill_requested: kill_requested === 1 };
}
