import { type ErrorCode, SandtreeError } from "@sandtree/protocol";
import { DeadlineError } from "../util/deadline.js";

/** An error the guest agent reported for one request: errno name plus message. */
export class GuestError extends Error {
  constructor(
    readonly errnoCode: string,
    readonly errno: number,
    message: string,
  ) {
    super(message);
    this.name = "GuestError";
  }
}

/** The agent's connection is gone (the VM died or was killed, e.g. after missing a deadline). */
export class AgentClosedError extends Error {
  override readonly name: string = "AgentClosedError";
}

/**
 * The guest broke the protocol (a reply of the wrong shape, output past its credit, a malformed
 * frame): its connection is closed and its VM stopped, since only a replaced agent does that.
 */
export class AgentProtocolError extends AgentClosedError {
  override readonly name = "AgentProtocolError";
  constructor(readonly violation: string) {
    super(`the guest agent broke the protocol: ${violation}`);
  }
}

const ERRNO_TO_CODE: Record<string, ErrorCode> = {
  ENOENT: "FILE_NOT_FOUND",
  EISDIR: "IS_A_DIRECTORY",
  ENOTDIR: "NOT_A_DIRECTORY",
  EEXIST: "ALREADY_EXISTS",
  ENOTEMPTY: "DIRECTORY_NOT_EMPTY",
  EACCES: "FORBIDDEN",
  EPERM: "FORBIDDEN",
  EINVAL: "BAD_REQUEST",
  ENAMETOOLONG: "INVALID_PATH",
  ELOOP: "INVALID_PATH",
};

/** Maps a guest errno to the API's stable error code; anything unknown is GUEST_ERROR. */
export function toSandtreeError(err: unknown, path?: string): unknown {
  if (err instanceof AgentClosedError || err instanceof DeadlineError) {
    return new SandtreeError("GUEST_ERROR", `the guest did not answer: ${err.message}`, path !== undefined ? { path } : {});
  }
  if (!(err instanceof GuestError)) return err;
  const code = ERRNO_TO_CODE[err.errnoCode] ?? "GUEST_ERROR";
  const details: Record<string, unknown> = { errno: err.errnoCode };
  if (path !== undefined) details.path = path;
  return new SandtreeError(code, err.message, details);
}
