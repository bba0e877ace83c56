import { hostErrorToApi } from "@sandtree/host";
import { type ErrorCode, SandtreeError } from "@sandtree/protocol";

/**
 * The service boundary's error table: what a service, a VM, its VMM, the guest agent, a host tool
 * or the database threw, as a SandtreeError with a stable code. Undefined for an error nobody
 * knows (a bug): the caller logs it and answers a plain 500 INTERNAL.
 */
export function toApiError(err: unknown): SandtreeError | undefined {
  const known = hostErrorToApi(err);
  if (known) return known;
  const code = (err as { code?: unknown } | null | undefined)?.code;
  if (code === "SQLITE_FULL" || code === "ENOSPC") {
    return new SandtreeError(
      "HOST_DISK_FULL",
      "the server's data disk is full; free space on the host and retry",
      {},
      { cause: err },
    );
  }
  return undefined;
}

/** The code of an error reported inside a stream (exec, PTY), where `fallback` names the usual cause. */
export function streamErrorCode(err: unknown, fallback: ErrorCode): ErrorCode {
  return toApiError(err)?.code ?? fallback;
}
