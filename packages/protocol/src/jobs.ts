import { z } from "zod";
import { commandField, cwdField, envField, userField } from "./command-fields.js";
import { Signal } from "./signals.js";

/** A background job: runs detached in the guest until it ends or the sandbox ends (no time limit). */
export const StartJobRequest = z.strictObject({
  /** Run under `/bin/sh -c`; an array is joined as shell-quoted words. */
  command: commandField,
  cwd: cwdField.optional(),
  env: envField,
  user: userField.optional(),
});
export type StartJobRequest = z.input<typeof StartJobRequest>;
export type StartJobParams = z.output<typeof StartJobRequest>;

export const JOB_STATUSES = ["RUNNING", "EXITED", "KILLED"] as const;
export const JobStatus = z.enum(JOB_STATUSES);
export type JobStatus = z.infer<typeof JobStatus>;

export const Job = z.object({
  job_id: z.string(),
  sandbox_id: z.string(),
  command: z.string(),
  status: JobStatus,
  /** The shell's status: the exit code, or 128+N when killed by signal N; null while running or when lost. */
  exit_code: z.number().int().nullable(),
  stdout_tail: z.string(),
  stderr_tail: z.string(),
  /** The tail holds only the end of the stream (read the rest with /output). */
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  stdout_bytes: z.number().int(),
  stderr_bytes: z.number().int(),
  started_at: z.string(),
  ended_at: z.string().nullable(),
  /** Why a job ended without an exit status (e.g. the sandbox ended). */
  error_reason: z.string().nullable().default(null),
});
export type Job = z.infer<typeof Job>;

export const JobList = z.object({ jobs: z.array(Job) });
export type JobList = z.infer<typeof JobList>;

export const KillJobRequest = z.strictObject({
  signal: Signal.default("SIGTERM"),
});
export type KillJobRequest = z.input<typeof KillJobRequest>;

/** `?stream=stdout|stderr&offset=N&length=M` of job and exec output reads. */
export const OutputQuery = z.strictObject({
  stream: z.enum(["stdout", "stderr"]).default("stdout"),
  offset: z.coerce.number().int().min(0).default(0),
  length: z.coerce.number().int().min(0).optional(),
});
export type OutputQuery = z.input<typeof OutputQuery>;
