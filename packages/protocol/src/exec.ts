import { z } from "zod";
import { Signal } from "./signals.js";

const envKey = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "environment variable names are letters, digits and '_'");
const noNul = (s: string) => !s.includes("\0");

export const ExecRequest = z.strictObject({
  /** A string runs under `/bin/sh -c`; an array is the argv, run directly. */
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
  timeout_seconds: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .optional(),
  /** Text written to the command's stdin, which is then closed. */
  stdin: z
    .string()
    .max(16 * 1024 * 1024)
    .optional(),
  /** Streamed exec only: keep stdin open for writes through `/execs/{exec_id}/stdin`. */
  stdin_open: z.boolean().default(false),
});
export type ExecRequest = z.input<typeof ExecRequest>;
export type ExecParams = z.output<typeof ExecRequest>;

export const ExecResult = z.object({
  stdout: z.string(),
  stderr: z.string(),
  exit_code: z.number().int(),
  signal: z.number().int().nullable(),
  timed_out: z.boolean(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  duration_ms: z.number(),
  /** The whole output is kept on the server: GET /execs/{exec_id}/output (until the sandbox is deleted). */
  exec_id: z.string().optional(),
  stdout_bytes: z.number().int().optional(),
  stderr_bytes: z.number().int().optional(),
  /** Even the kept copy lost bytes: the stream passed the server's spill cap (4 GiB). */
  stdout_spill_truncated: z.boolean().optional(),
  stderr_spill_truncated: z.boolean().optional(),
});
export type ExecResult = z.infer<typeof ExecResult>;

/** Events of a streamed exec (NDJSON lines or SSE events); `data` is base64. */
export const ExecEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("started"), exec_id: z.string(), pid: z.number().int() }),
  z.object({ type: z.literal("stdout"), data: z.string() }),
  z.object({ type: z.literal("stderr"), data: z.string() }),
  z.object({
    type: z.literal("exit"),
    exit_code: z.number().int(),
    signal: z.number().int().nullable(),
    timed_out: z.boolean(),
    duration_ms: z.number(),
  }),
  z.object({ type: z.literal("error"), code: z.string(), message: z.string() }),
]);
export type ExecEvent = z.infer<typeof ExecEvent>;

export const SignalRequest = z.strictObject({
  signal: Signal.default("SIGKILL"),
});
export type SignalRequest = z.input<typeof SignalRequest>;
