import { z } from "zod";

// One registry of error codes: each stable code maps to one HTTP status.
export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  VALIDATION_FAILED: 400,
  INVALID_PATH: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SANDBOX_NOT_FOUND: 404,
  IMAGE_NOT_FOUND: 404,
  FILE_NOT_FOUND: 404,
  JOB_NOT_FOUND: 404,
  TEAM_NOT_FOUND: 404,
  KEY_NOT_FOUND: 404,
  HOST_NOT_FOUND: 404,
  CHECKPOINT_NOT_FOUND: 404,
  VOLUME_NOT_FOUND: 404,
  /** A volume delete while a sandbox that is not ended mounts it; details.sandboxes names them. */
  VOLUME_IN_USE: 409,
  /** A write that would take a volume past its size_gb; nothing of it is left in the volume. */
  VOLUME_FULL: 507,
  /** A volume create on a host that cannot loop-mount its size-bounding image (not root, no loop devices). */
  VOLUME_BOUND_UNAVAILABLE: 501,
  /** A volume file path names a symlink, device, fifo or socket (or crosses one): never followed nor opened. */
  UNSAFE_PATH: 400,
  CHECKPOINT_NOT_READY: 409,
  CHECKPOINT_FAILED: 409,
  CHECKPOINT_CORRUPT: 422,
  CHECKPOINT_HAS_NO_MEMORY: 409,
  ROUTE_NOT_FOUND: 404,
  PORT_NOT_FOUND: 404,
  PORT_TOKEN_INVALID: 401,
  NETWORK_DISABLED: 409,
  NETWORK_UNAVAILABLE: 409,
  NETWORK_SETUP_FAILED: 500,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  SANDBOX_NOT_RUNNING: 409,
  IS_A_DIRECTORY: 409,
  NOT_A_DIRECTORY: 409,
  ALREADY_EXISTS: 409,
  IDEMPOTENCY_MISMATCH: 409,
  DIRECTORY_NOT_EMPTY: 409,
  /** The team's monthly budget is spent: nothing new starts billing until next month or a raise. */
  BUDGET_EXCEEDED: 402,
  /** A desktop action on a sandbox created without `display` (or whose image has no desktop). */
  NO_DISPLAY: 409,
  /** A desktop action's coordinates fall outside the sandbox's display. */
  OUT_OF_DISPLAY: 400,
  /** A desktop action ran and failed in the guest (e.g. wait_window timed out); details.event holds its event. */
  DESKTOP_ACTION_FAILED: 422,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  RATE_LIMIT_HOURLY: 429,
  RATE_LIMIT_BURST: 429,
  QUOTA_SANDBOXES: 429,
  QUOTA_VCPUS: 429,
  QUOTA_MEMORY: 429,
  QUOTA_STORAGE: 429,
  /** The team has max_volumes volumes already. */
  QUOTA_VOLUMES: 429,
  /** The team's volumes' size_gb would sum past max_volume_gb. */
  QUOTA_VOLUME_STORAGE: 429,
  INTERNAL: 500,
  IMAGE_PULL_FAILED: 502,
  REGISTRY_UNAUTHORIZED: 502,
  REGISTRY_UNREACHABLE: 502,
  IMAGE_INVALID: 422,
  GUEST_ERROR: 502,
  /** QEMU refused a command or its control connection closed (the VM exited under the call). */
  VM_ERROR: 502,
  /** QEMU did not answer its control socket in time: the VM is stopped or hung. */
  VM_UNRESPONSIVE: 504,
  VM_START_FAILED: 500,
  VOLUME_MOUNT_FAILED: 500,
  /** A host tool (qemu-img, zstd, ip, nft...) failed; details carry its argv, exit code and stderr. */
  HOST_COMMAND_FAILED: 500,
  UNAVAILABLE: 503,
  /** No host of the fleet has the free vCPUs, memory, disk or accelerator (or the pinned host has not). */
  NO_CAPACITY: 503,
  /**
   * A create, restore or fork asks for more vCPUs, memory or disk than any host has in all (not a
   * busy fleet: no host could ever hold it); details say what was asked and what the largest host has.
   */
  EXCEEDS_HOST_CAPACITY: 422,
  /** The sandbox's host stopped heartbeating (also the error_reason prefix of its sandboxes). */
  HOST_LOST: 503,
  /** A create pinned (`host`) to a cordoned, draining or LOST host: it takes no new sandbox. */
  HOST_UNSCHEDULABLE: 409,
  /** The worker that holds the sandbox did not answer the control plane (down, unreachable, refused its key). */
  WORKER_UNREACHABLE: 502,
  /** The call cannot run on the host it names (a restore that must run on the control plane's own host). */
  NOT_ON_REMOTE_HOST: 501,
  /** A worker joined with a blob store (SANDTREE_BLOB_STORE) other than the control plane's. */
  BLOB_STORE_MISMATCH: 409,
  /**
   * A restore or fork elsewhere of a checkpoint whose layers live only on the host that took it
   * (the control plane keeps layers in a local directory, not an object store).
   */
  CHECKPOINT_NOT_ON_HOST: 409,
  /** A create that mounts volumes was pinned to a host that does not hold them, and volumes cannot move (no object store). */
  VOLUME_NOT_ON_HOST: 409,
  /** A volume must move to another host for this call, but a sandbox on its current host mounts it. */
  VOLUME_IN_USE_ELSEWHERE: 409,
  /** The volume's host was lost before any copy of it reached the object store: its data is gone (delete it). */
  VOLUME_LOST: 410,
  /** At start: this server's server.key or join token differs from the one its database was first used with. */
  KEY_MISMATCH: 500,
  HOST_DISK_FULL: 507,
  TIMEOUT: 504,
  /** A feature of a foreign API (the E2B adapter's) that sandtree has no counterpart for; the message names it. */
  NOT_SUPPORTED: 501,
  /** nested_virtualization asked of a host whose KVM does not allow nested guests. */
  NESTED_VIRT_UNAVAILABLE: 422,
  /** A memory state saved on another accelerator or CPU model than the machine it would load into. */
  MEMORY_STATE_INCOMPATIBLE: 409,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Every code of the registry. */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** Whether `code` is one of the registry's (a newer server may send codes this version lacks). */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_STATUS, code);
}

/** The body of every error answer: `code` is a string on the wire so a newer server's codes still parse. */
export const ErrorBody = z.object({
  code: z.string(),
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
  request_id: z.string().optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

export function statusForCode(code: string): number {
  return isErrorCode(code) ? ERROR_STATUS[code] : 500;
}

/** An error with a stable code; rendered by the server as {code, message, details, requestId}. */
export class SandtreeError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SandtreeError";
    this.code = code;
    this.details = details;
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}
