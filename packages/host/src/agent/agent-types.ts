import type { Frame } from "./frame-codec.js";
import { GuestError } from "./guest-error.js";

// What the guest protocol's calls answer (docs/protocol.md).

export interface AgentInfo {
  version: number;
  kernel: string;
  boot_ms?: number;
  /** The root disk: "mounted", "waiting" (a warm template, until a HELLO carries ROOT) or "failed". */
  root?: string;
}

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

export interface ExitInfo {
  exit_code: number;
  signal: number | null;
  timed_out: boolean;
}

export type AgentExecEvent =
  | { type: "started"; pid: number }
  | { type: "stdout"; data: Buffer }
  | { type: "stderr"; data: Buffer }
  | { type: "exit"; info: ExitInfo };

export interface StatInfo {
  name?: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime_ms: number;
  target?: string;
}

export interface StreamHandler {
  onFrame(frame: Frame): void;
  onClose(err: Error): void;
}

export const FILE_CHUNK = 64 * 1024;

export function parseJson<T>(payload: Buffer): T {
  return JSON.parse(payload.toString("utf8")) as T;
}

export function guestError(payload: Buffer): GuestError {
  try {
    const e = parseJson<{ errno?: number; code?: string; message?: string }>(payload);
    return new GuestError(e.code ?? "EIO", e.errno ?? 5, e.message ?? "guest error");
  } catch {
    return new GuestError("EIO", 5, payload.toString("utf8") || "guest error");
  }
}
