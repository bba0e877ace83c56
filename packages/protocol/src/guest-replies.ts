import { z } from "zod";

// What the guest agent answers (docs/protocol.md). The guest runs code nobody trusts as root, and
// root can take over the agent's port: every reply is checked against these before the host uses
// it, so a hostile reply (a deep JSON nesting, a string where a number belongs, a megabyte name)
// is a protocol violation instead of a value that breaks a caller later.

const int = z.number().int().safe();
const text = (max: number) => z.string().max(max);

export const GuestHelloSchema = z.object({
  version: int,
  kernel: text(256),
  boot_ms: int.optional(),
  /** The root disk: "mounted", "waiting" (a warm template, until a HELLO carries ROOT) or "failed". */
  root: text(32).optional(),
});
export type GuestHello = z.infer<typeof GuestHelloSchema>;

export const GuestStartedSchema = z.object({ pid: int.nonnegative() });

export const GuestExitSchema = z.object({
  exit_code: int,
  signal: int.nullable(),
  timed_out: z.boolean(),
});
export type GuestExit = z.infer<typeof GuestExitSchema>;

export const GuestStatSchema = z.object({
  name: text(4096).optional(),
  type: z.enum(["file", "dir", "symlink", "other"]),
  size: int.nonnegative(),
  mode: int.nonnegative(),
  uid: int.nonnegative(),
  gid: int.nonnegative(),
  mtime_ms: int,
  target: text(4096).optional(),
});
export type GuestStat = z.infer<typeof GuestStatSchema>;

export const GuestBytesSchema = z.object({ bytes: int.nonnegative() });

/** A RESULT with nothing to say (mkdir, remove, fsfreeze): an object, members ignored. */
export const GuestEmptySchema = z.object({}).transform(() => undefined);

export const GuestErrorSchema = z.object({
  errno: int.optional(),
  code: z
    .string()
    .regex(/^E[A-Z0-9]{1,15}$/)
    .optional(),
  message: z.string().optional(),
});

/** The longest guest error message passed on (the rest is cut): a guest cannot fill API answers. */
export const GUEST_MESSAGE_MAX = 1024;
