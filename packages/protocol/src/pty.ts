import { z } from "zod";
import { cwdField, shellCommandField, userField } from "./command-fields.js";
import { Signal } from "./signals.js";

const size = (max: number, dflt: number) => z.coerce.number().int().min(1).max(max).default(dflt);

/** Query of `GET /v1/sandboxes/{id}/pty` (a WebSocket upgrade). */
export const PtyQuery = z.strictObject({
  /** Runs under `/bin/sh -c`; default: the image's shell (/bin/bash if present, else /bin/sh). */
  command: shellCommandField.optional(),
  rows: size(1000, 24),
  cols: size(1000, 80),
  cwd: cwdField.optional(),
  user: userField.optional(),
});
export type PtyQuery = z.input<typeof PtyQuery>;
export type PtyParams = z.output<typeof PtyQuery>;

/**
 * Text frames from the client (binary frames are keystrokes). `eof` types the terminal's
 * end-of-file character (^D), for a client whose own input ended.
 */
export const PtyClientMessage = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("resize"), rows: z.number().int().min(1).max(1000), cols: z.number().int().min(1).max(1000) }),
  z.strictObject({
    type: z.literal("signal"),
    signal: Signal,
  }),
  z.strictObject({ type: z.literal("eof") }),
]);
export type PtyClientMessage = z.infer<typeof PtyClientMessage>;

/** Text frames from the server (binary frames are terminal output). `exit` is last; then the socket closes. */
export const PtyServerMessage = z.discriminatedUnion("type", [
  z.object({ type: z.literal("exit"), exit_code: z.number().int(), signal: z.number().int().nullable() }),
  z.object({ type: z.literal("error"), code: z.string(), message: z.string() }),
]);
export type PtyServerMessage = z.infer<typeof PtyServerMessage>;

/** Subprotocol a client may offer beside `bearer.<API key>` where it cannot set headers (browsers). */
export const PTY_SUBPROTOCOL = "sandtree.pty.v1";
