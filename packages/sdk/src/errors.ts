import { type ErrorBody, statusForCode } from "@sandtree/protocol";

/** Root of every error the SDK throws; `code` is stable and safe to branch on. */
export class SandtreeSdkError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export interface ApiErrorInit {
  status: number;
  code: string;
  message: string;
  requestId?: string | undefined;
  details?: Record<string, unknown> | undefined;
}

/** The server answered with a non-2xx status (or an `error` event inside a stream). */
export class SandtreeApiError extends SandtreeSdkError {
  readonly status: number;
  readonly requestId: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  constructor(init: ApiErrorInit) {
    super(init.code, init.message);
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
  }
}

/** 401: the API key is missing, wrong or revoked. */
export class AuthenticationError extends SandtreeApiError {}
/** 403: the key may not do this (e.g. admin endpoints with a team key). */
export class PermissionError extends SandtreeApiError {}
/** 404: the sandbox, image, file or route does not exist. */
export class NotFoundError extends SandtreeApiError {}
/** 409: the resource is in the wrong state (e.g. SANDBOX_NOT_RUNNING) or already exists. */
export class ConflictError extends SandtreeApiError {}
/** 400/422: the request was rejected; `details.field` names the offending field when known. */
export class ValidationError extends SandtreeApiError {}
/** 429: too many requests; retry after `retryAfterMs` (undefined when the server did not say). */
export class RateLimitError extends SandtreeApiError {
  readonly retryAfterMs: number | undefined;
  constructor(init: ApiErrorInit & { retryAfterMs?: number | undefined }) {
    super(init);
    this.retryAfterMs = init.retryAfterMs;
  }
}
/** 402 BUDGET_EXCEEDED: the team's monthly budget is spent; nothing new starts until it is raised or the month ends. */
export class BudgetExceededError extends SandtreeApiError {}
/** 5xx (and any other unexpected status): the server or the sandbox failed. */
export class ServerError extends SandtreeApiError {}

/** A client-side deadline ran out (request timeout, waitForCreation timeout). */
export class TimeoutError extends SandtreeSdkError {
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number, options?: { cause?: unknown }) {
    super("CLIENT_TIMEOUT", message, options);
    this.timeoutMs = timeoutMs;
  }
}

/** The server could not be reached, or the connection broke mid-request. */
export class ConnectionError extends SandtreeSdkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("CONNECTION_FAILED", message, options);
  }
}

/** The client is misconfigured (e.g. no API key). */
export class ConfigurationError extends SandtreeSdkError {}

/** The server answered with a body that does not match the protocol (version mismatch?). */
export class InvalidResponseError extends SandtreeSdkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("INVALID_RESPONSE", message, options);
  }
}

/** A sandbox reached ERROR, TIMEOUT or TERMINATED while we waited for it to run. */
export class SandboxFailedError extends SandtreeSdkError {
  readonly sandboxId: string;
  readonly status: string;
  readonly errorReason: string | null;
  constructor(sandboxId: string, status: string, errorReason: string | null) {
    const why = errorReason ? `: ${errorReason}` : "";
    super(
      `SANDBOX_${status}`,
      `sandbox ${sandboxId} ended in ${status}${why}; inspect \`sandtree sandbox logs ${sandboxId}\` and create a new sandbox`,
    );
    this.sandboxId = sandboxId;
    this.status = status;
    this.errorReason = errorReason;
  }
}

/** What to do next for a sandbox that is not RUNNING, by the status the server reported. */
function notRunningHint(status: unknown): string {
  if (status === "PAUSED") return " (resume it: `sandtree sandbox resume ID` or sandboxes.resume())";
  if (status === "PENDING" || status === "PROVISIONING") {
    return " (it is still starting: wait with `sandtree sandbox create --wait` or sandboxes.waitForCreation())";
  }
  if (typeof status === "string") {
    return " (it has ended and cannot run again: create a new sandbox, or restore one of its checkpoints)";
  }
  return " (see its status with `sandtree sandbox get ID`)";
}

/** What to do next, appended to the server's message per status. */
function hintFor(status: number, code: string, details: Record<string, unknown> | undefined): string {
  if (status === 401) return " (check SANDTREE_API_KEY or --api-key; the server writes it to <data-dir>/credentials.env)";
  if (code === "SANDBOX_NOT_RUNNING") return notRunningHint(details?.status);
  if (code === "SANDBOX_NOT_FOUND") return " (list sandboxes with `sandtree sandbox list`)";
  if (code === "IMAGE_NOT_FOUND") return " (check the name with `sandtree image list`, or pull it: `sandtree image pull REF`)";
  if (code === "REGISTRY_UNREACHABLE") return " (check the registry's address and that it is running; then retry)";
  if (code === "BUDGET_EXCEEDED") return " (running sandboxes go on; an admin can raise it: `sandtree team budget NAME --usd N`)";
  if (status === 403) return " (ask for an admin key: `sandtree key create --team NAME --admin`)";
  if (status === 429) return " (slow down and retry later)";
  if (status >= 500) return " (retry; if it persists, check the server logs)";
  return "";
}

/** Maps a stable error code and HTTP status to the matching typed error. */
export function apiErrorFrom(
  status: number,
  body: ErrorBody,
  extra: { retryAfterMs?: number | undefined; requestId?: string | undefined } = {},
): SandtreeApiError {
  const init: ApiErrorInit = {
    status,
    code: body.code,
    message: body.message + hintFor(status, body.code, body.details),
    requestId: body.request_id ?? extra.requestId,
    details: body.details,
  };
  if (status === 401) return new AuthenticationError(init);
  if (status === 402) return new BudgetExceededError(init);
  if (status === 403) return new PermissionError(init);
  if (status === 404) return new NotFoundError(init);
  if (status === 409) return new ConflictError(init);
  if (status === 400 || status === 422) return new ValidationError(init);
  if (status === 429) return new RateLimitError({ ...init, retryAfterMs: extra.retryAfterMs });
  if (status >= 500) return new ServerError(init);
  return new SandtreeApiError(init);
}

/** For errors reported inside a stream (exec `error` event), where only the code is known. */
export function apiErrorFromCode(code: string, message: string): SandtreeApiError {
  return apiErrorFrom(statusForCode(code), { code, message });
}

/** Parses a Retry-After header (seconds or HTTP date) into milliseconds. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000));
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
