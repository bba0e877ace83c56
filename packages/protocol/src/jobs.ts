import { z } from "zod";
import { Signal } from "./signals.js";

const envKey = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "environment variable names are letters, digits and '_'");
const noNul = (s: string) => !s.includes("\0");

/** A background job: runs detached in the guest until it ends or the sandbox ends (no time limit). */
export const StartJobRequest = z.strictObject({
  /** Run under `/bin/sh -c`; an array is joined as shell-quoted words. */
  command: z.union([
    z.string().min(1).max(1_048_576).refine(noNul, "must not contain NUL"),
    z.array(z.string().max(1_048_576).refine(noNul, "must not contain NUL")).min(1).max(65_536),
  ]),
  cwd: z.string().min(1).max(4096).refine(noNul, "must not contain NUL").optional(),
  env: z.record(envKey, z.string().max(32_768).refine(noNul, "must not contain NUL")).default({}),
  user: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_.-]+$/, "a user name or a numeric uid")
    .optional(),
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
