import { z } from "zod";
import { commandField, cwdField, envField, userField } from "./command-fields.js";
import { Signal } from "./signals.js";

export const ExecRequest = z.strictObject({
  /** A string runs under `/bin/sh -c`; an array is the argv, run directly. */
  command: commandField,
  cwd: cwdField.optional(),
  env: envField,
  user: userField.optional(),
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
