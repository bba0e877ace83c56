import { GUEST_MESSAGE_MAX, GuestErrorSchema, type GuestExit, type GuestHello, type GuestStat } from "@sandtree/protocol";
import type { Frame } from "./frame-codec.js";
import { AgentProtocolError, GuestError } from "./guest-error.js";

// What the guest protocol's calls answer (docs/protocol.md).

export type AgentInfo = GuestHello;
export type ExitInfo = GuestExit;
export type StatInfo = GuestStat;

export interface ExecSpec {
  argv?: string[];
  shell?: string;
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  timeoutMs?: number;
  stdin?: boolean;
  /** Run on a new pseudo-terminal of this size (stdin is then always open; output is STDOUT only). */
  pty?: { rows: number; cols: number };
}

export type AgentExecEvent =
  | { type: "started"; pid: number }
  | { type: "stdout"; data: Buffer }
  | { type: "stderr"; data: Buffer }
  | { type: "exit"; info: ExitInfo };

export interface StreamHandler {
  onFrame(frame: Frame): void;
  onClose(err: Error): void;
}

export const FILE_CHUNK = 64 * 1024;

/** What parseReply needs of a zod schema (the host package does not depend on zod itself). */
export interface ReplySchema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false };
}

/**
 * Parses and checks one guest reply. Anything else (not JSON, the wrong shape, a number out of
 * range, a deep nesting) is a protocol violation: the guest is root and may have replaced its agent.
 */
export function parseReply<T>(schema: ReplySchema<T>, payload: Buffer, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString("utf8"));
  } catch {
    throw new AgentProtocolError(`${what}: not JSON (${payload.length} bytes)`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new AgentProtocolError(`${what}: unexpected shape (${payload.length} bytes)`);
  return parsed.data;
}

/** An ERROR frame's reply; a malformed one is still an error of that request, its text cut short. */
export function guestError(payload: Buffer): GuestError {
  const cut = (m: string) => (m.length > GUEST_MESSAGE_MAX ? `${m.slice(0, GUEST_MESSAGE_MAX)}...` : m);
  let value: unknown;
  try {
    value = JSON.parse(payload.toString("utf8"));
  } catch {
    value = undefined;
  }
  const e = GuestErrorSchema.safeParse(value);
  if (!e.success)
    return new GuestError("EIO", 5, cut(payload.subarray(0, GUEST_MESSAGE_MAX * 4).toString("utf8") || "guest error"));
  return new GuestError(e.data.code ?? "EIO", e.data.errno ?? 5, cut(e.data.message ?? "guest error"));
}
