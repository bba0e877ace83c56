import { type ErrorBody, type ErrorCode, isErrorCode, statusForCode } from "@sandtree/protocol";

/** Root of every error the SDK throws; `code` is stable and safe to branch on. */
export class SandtreeSdkError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A code of the protocol's registry, or one a newer server (or a proxy: `HTTP_<status>`) sent. */
export type ApiErrorCode = ErrorCode | (string & {});

export interface ApiErrorInit {
  status: number;
  code: ApiErrorCode;
  message: string;
  requestId?: string | undefined;
  details?: Record<string, unknown> | undefined;
}

/** The server answered with a non-2xx status (or an `error` event inside a stream). */
export class SandtreeApiError extends SandtreeSdkError {
  declare readonly code: ApiErrorCode;
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
/** 409 SANDBOX_NOT_RUNNING: `details.status` says whether it is PAUSED, still starting or ended. */
export class SandboxNotRunningError extends ConflictError {}
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
/** 429 QUOTA_*: a team limit (sandboxes, vCPUs, memory, storage) is reached; `details` has limit, used, requested. */
export class QuotaExceededError extends RateLimitError {}
/** 402 BUDGET_EXCEEDED: the team's monthly budget is spent; nothing new starts until it is raised or the month ends. */
export class BudgetExceededError extends SandtreeApiError {}
/** 5xx (and any other unexpected status): the server or the sandbox failed. */
export class ServerError extends SandtreeApiError {}
/** 502 IMAGE_PULL_FAILED / REGISTRY_*: the image's registry refused or did not answer. */
export class ImagePullError extends ServerError {}
/** GUEST_ERROR, VM_ERROR, VM_UNRESPONSIVE, VM_START_FAILED: the sandbox's VM or its agent failed. */
export class SandboxVmError extends ServerError {}

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
  /** Why it ended in ERROR, as the sandbox's stable `error_code` (null: another status, or an older server). */
  readonly errorCode: string | null;
  constructor(sandboxId: string, status: string, errorReason: string | null, errorCode: string | null = null) {
    const why = errorReason ? `: ${errorReason}` : "";
    super(
      `SANDBOX_${status}`,
      `sandbox ${sandboxId} ended in ${status}${why}; inspect \`sandtree sandbox logs ${sandboxId}\` and create a new sandbox`,
    );
    this.sandboxId = sandboxId;
    this.status = status;
    this.errorReason = errorReason;
    this.errorCode = errorCode;
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

type Hint = string | ((details: Record<string, unknown> | undefined) => string);

const VM_FAILED = " (the sandbox's VM failed: read `sandtree sandbox logs ID`; create a new sandbox if it ended)";
const QUOTA = " (end sandboxes you no longer need, or ask an admin to raise the team's limit)";

/** What to do next, by code; codes without one get the hint of their status class. */
const HINTS: Partial<Record<ErrorCode, Hint>> = {
  UNAUTHORIZED: " (check SANDTREE_API_KEY or --api-key; the server writes it to <data-dir>/credentials.env)",
  SANDBOX_NOT_RUNNING: (details) => notRunningHint(details?.status),
  SANDBOX_NOT_FOUND: " (list sandboxes with `sandtree sandbox list`)",
  IMAGE_NOT_FOUND: " (check the name with `sandtree image list`, or pull it: `sandtree image pull REF`)",
  REGISTRY_UNREACHABLE: " (check the registry's address and that it is running; then retry)",
  BUDGET_EXCEEDED: " (running sandboxes go on; an admin can raise it: `sandtree team budget NAME --usd N`)",
  IDEMPOTENCY_MISMATCH: " (the key was used before with another body: send a new idempotency key)",
  QUOTA_SANDBOXES: QUOTA,
  QUOTA_VCPUS: QUOTA,
  QUOTA_MEMORY: QUOTA,
  QUOTA_STORAGE: QUOTA,
  QUOTA_VOLUMES: QUOTA,
  QUOTA_VOLUME_STORAGE: QUOTA,
  VOLUME_IN_USE: " (delete the sandboxes that mount it first: details.sandboxes names them)",
  VOLUME_BOUND_UNAVAILABLE: " (run the server as root with loop devices, or with SANDTREE_VOLUME_BOUND=none)",
  VOLUME_FULL: " (delete files in the volume, or create a larger volume and copy the files there)",
  UNSAFE_PATH: " (the path is a symlink, device, fifo or socket, or goes through one: the volume file API never follows them)",
  GUEST_ERROR: VM_FAILED,
  VM_ERROR: VM_FAILED,
  VM_UNRESPONSIVE: " (the sandbox's VM did not answer in time: retry; if it persists, delete the sandbox and create a new one)",
  VM_START_FAILED: " (the VM did not boot: read `sandtree sandbox logs ID` and the server's log, then retry)",
  VOLUME_MOUNT_FAILED: " (the sandbox could not mount a volume: read the message and the server's log, then retry)",
  NO_CAPACITY: " (no host has room for it now: retry later, or ask an admin to add hosts: `sandtree host list`)",
  EXCEEDS_HOST_CAPACITY: " (ask for at most what the largest host has: details.largest; an admin adds larger hosts)",
  NESTED_VIRT_UNAVAILABLE:
    " (this host's KVM does not allow nested guests: leave nested_virtualization out, or ask an admin to enable nesting)",
  MEMORY_STATE_INCOMPATIBLE: " (a memory state loads only into the accelerator and CPU it was saved on: restore without memory)",
  HOST_NOT_FOUND: " (list hosts with `sandtree host list`)",
  HOST_LOST: " (its host stopped answering: create a new sandbox, or restore one of its checkpoints)",
  HOST_UNSCHEDULABLE: " (that host takes no new sandbox: pin another, or leave host out; `sandtree host list`)",
  WORKER_UNREACHABLE: " (the fleet worker holding this sandbox did not answer: retry; an admin checks `sandtree host list`)",
  NOT_ON_REMOTE_HOST: " (that call runs on another host than the one named: omit host)",
  BLOB_STORE_MISMATCH:
    " (a worker uses the control plane's object store: unset SANDTREE_BLOB_STORE on the worker, or set it to the control plane's)",
  CHECKPOINT_NOT_ON_HOST:
    " (its layers are only on the host that took it: restore it there (host), or give the fleet an object store)",
  VOLUME_NOT_ON_HOST: " (without an object store a volume stays on its host: omit host)",
  VOLUME_IN_USE_ELSEWHERE:
    " (the volume is mounted on another host: place the sandbox there, or end the sandboxes that mount it, then retry)",
  VOLUME_LOST: " (its host was lost before any copy reached the object store: delete the volume and make it again)",
  HOST_DISK_FULL: " (the server's disk is full: free space on the host, then retry)",
  HOST_COMMAND_FAILED: " (a tool on the server failed: details.command and details.stderr say which; check the server's setup)",
};

function statusHint(status: number): string {
  if (status === 401) return HINTS.UNAUTHORIZED as string;
  if (status === 403) return " (ask for an admin key: `sandtree key create --team NAME --admin`)";
  if (status === 429) return " (slow down and retry later)";
  if (status >= 500) return " (retry; if it persists, check the server logs)";
  return "";
}

function hintFor(status: number, code: string, details: Record<string, unknown> | undefined): string {
  const hint = isErrorCode(code) ? HINTS[code] : undefined;
  if (hint === undefined) return statusHint(status);
  return typeof hint === "string" ? hint : hint(details);
}

type ApiErrorClass = new (init: ApiErrorInit & { retryAfterMs?: number | undefined }) => SandtreeApiError;

/** Every code of the registry, mapped to its typed error (the compiler checks that none is missing). */
export const ERROR_CLASSES: Record<ErrorCode, ApiErrorClass> = {
  BAD_REQUEST: ValidationError,
  VALIDATION_FAILED: ValidationError,
  INVALID_PATH: ValidationError,
  CHECKPOINT_CORRUPT: ValidationError,
  IMAGE_INVALID: ValidationError,
  PAYLOAD_TOO_LARGE: ValidationError,
  UNSUPPORTED_MEDIA_TYPE: ValidationError,
  OUT_OF_DISPLAY: ValidationError,
  DESKTOP_ACTION_FAILED: ValidationError,
  EXCEEDS_HOST_CAPACITY: ValidationError,
  NESTED_VIRT_UNAVAILABLE: ValidationError,
  UNAUTHORIZED: AuthenticationError,
  PORT_TOKEN_INVALID: AuthenticationError,
  FORBIDDEN: PermissionError,
  NOT_FOUND: NotFoundError,
  SANDBOX_NOT_FOUND: NotFoundError,
  IMAGE_NOT_FOUND: NotFoundError,
  FILE_NOT_FOUND: NotFoundError,
  JOB_NOT_FOUND: NotFoundError,
  TEAM_NOT_FOUND: NotFoundError,
  KEY_NOT_FOUND: NotFoundError,
  HOST_NOT_FOUND: NotFoundError,
  CHECKPOINT_NOT_FOUND: NotFoundError,
  VOLUME_NOT_FOUND: NotFoundError,
  VOLUME_IN_USE: ConflictError,
  VOLUME_FULL: ServerError,
  VOLUME_BOUND_UNAVAILABLE: ServerError,
  UNSAFE_PATH: ValidationError,
  QUOTA_VOLUMES: QuotaExceededError,
  QUOTA_VOLUME_STORAGE: QuotaExceededError,
  ROUTE_NOT_FOUND: NotFoundError,
  PORT_NOT_FOUND: NotFoundError,
  SANDBOX_NOT_RUNNING: SandboxNotRunningError,
  CHECKPOINT_NOT_READY: ConflictError,
  CHECKPOINT_FAILED: ConflictError,
  CHECKPOINT_HAS_NO_MEMORY: ConflictError,
  MEMORY_STATE_INCOMPATIBLE: ConflictError,
  NETWORK_DISABLED: ConflictError,
  NETWORK_UNAVAILABLE: ConflictError,
  NO_DISPLAY: ConflictError,
  METHOD_NOT_ALLOWED: SandtreeApiError,
  CONFLICT: ConflictError,
  IS_A_DIRECTORY: ConflictError,
  NOT_A_DIRECTORY: ConflictError,
  ALREADY_EXISTS: ConflictError,
  IDEMPOTENCY_MISMATCH: ConflictError,
  DIRECTORY_NOT_EMPTY: ConflictError,
  BUDGET_EXCEEDED: BudgetExceededError,
  RATE_LIMITED: RateLimitError,
  RATE_LIMIT_HOURLY: RateLimitError,
  RATE_LIMIT_BURST: RateLimitError,
  QUOTA_SANDBOXES: QuotaExceededError,
  QUOTA_VCPUS: QuotaExceededError,
  QUOTA_MEMORY: QuotaExceededError,
  QUOTA_STORAGE: QuotaExceededError,
  INTERNAL: ServerError,
  NETWORK_SETUP_FAILED: ServerError,
  UNAVAILABLE: ServerError,
  NO_CAPACITY: ServerError,
  HOST_LOST: ServerError,
  HOST_UNSCHEDULABLE: ConflictError,
  WORKER_UNREACHABLE: ServerError,
  NOT_ON_REMOTE_HOST: ServerError,
  BLOB_STORE_MISMATCH: ConflictError,
  CHECKPOINT_NOT_ON_HOST: ConflictError,
  VOLUME_NOT_ON_HOST: ConflictError,
  VOLUME_IN_USE_ELSEWHERE: ConflictError,
  VOLUME_LOST: NotFoundError,
  KEY_MISMATCH: ServerError,
  HOST_DISK_FULL: ServerError,
  HOST_COMMAND_FAILED: ServerError,
  TIMEOUT: ServerError,
  NOT_SUPPORTED: ServerError,
  IMAGE_PULL_FAILED: ImagePullError,
  REGISTRY_UNAUTHORIZED: ImagePullError,
  REGISTRY_UNREACHABLE: ImagePullError,
  GUEST_ERROR: SandboxVmError,
  VM_ERROR: SandboxVmError,
  VM_UNRESPONSIVE: SandboxVmError,
  VM_START_FAILED: SandboxVmError,
  VOLUME_MOUNT_FAILED: SandboxVmError,
};

/** A code this SDK does not know (a newer server, or a proxy's answer): the class of its HTTP status. */
function classForStatus(status: number): ApiErrorClass {
  if (status === 401) return AuthenticationError;
  if (status === 402) return BudgetExceededError;
  if (status === 403) return PermissionError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 400 || status === 422) return ValidationError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  return SandtreeApiError;
}

/** Maps an error answer to its typed error by `code`; the HTTP status decides only for unknown codes. */
export function apiErrorFrom(
  status: number,
  body: ErrorBody,
  extra: { retryAfterMs?: number | undefined; requestId?: string | undefined } = {},
): SandtreeApiError {
  const Class = isErrorCode(body.code) ? ERROR_CLASSES[body.code] : classForStatus(status);
  return new Class({
    status,
    code: body.code,
    message: body.message + hintFor(status, body.code, body.details),
    requestId: body.request_id ?? extra.requestId,
    details: body.details,
    retryAfterMs: extra.retryAfterMs,
  });
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
