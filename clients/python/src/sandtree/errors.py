"""Typed errors, mapped from the server's stable `code` (packages/protocol/src/errors.ts)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class APIError(Exception):
    """An error answer of the server, or a failure to reach it.

    `code` is the server's stable code (e.g. ``SANDBOX_NOT_FOUND``), `status` the HTTP status
    (0 when no answer came), `details` the structured details, `request_id` the server's id of
    the request (quote it when reporting a problem).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "INTERNAL",
        status: int = 0,
        details: Optional[Dict[str, Any]] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details: Dict[str, Any] = details or {}
        self.request_id = request_id

    def __str__(self) -> str:
        rid = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code}: {self.message}{rid}"


class APIConnectionError(APIError):
    """The server could not be reached, or the connection broke before an answer."""


class APITimeoutError(APIConnectionError):
    """No answer came within the request's timeout (prime_sandboxes' name; also exported as TimeoutError)."""


class PaymentRequiredError(APIError):
    """The team's monthly budget is used up (402 BUDGET_EXCEEDED): see BudgetExceededError."""


class InvalidResponseError(APIError):
    """The server answered something this client does not understand (a version mismatch?)."""


class ValidationError(APIError):
    """The request was refused as invalid; `details['field']` names the field."""


class UnauthorizedError(APIError):
    """The API key is missing, wrong or revoked: check SANDTREE_API_KEY or the server's credentials.env."""


class ForbiddenError(APIError):
    """The key may not do this (admin-only calls)."""


class NotFoundError(APIError):
    """What the call names does not exist (or belongs to another team)."""


class SandboxNotFoundError(NotFoundError):
    pass


class SandboxFileNotFoundError(NotFoundError):
    """No file at that path in the sandbox; `details['path']` names it."""


class SandboxFileTooLargeError(ValidationError):
    """A file or body is over a size limit of the server (413 PAYLOAD_TOO_LARGE): read a window of it
    with read_file(offset=..., length=...), or download_file()."""


class BatchStatusUnsupportedError(APIError):
    """prime_sandboxes raises it when a batch status route is missing; sandtree always has one, so it is
    only raised by a server that answers a batch route with 501 (never by sandtree itself)."""


class CheckpointNotFoundError(NotFoundError):
    pass


class JobNotFoundError(NotFoundError):
    pass


class ConflictError(APIError):
    """The request conflicts with the current state (e.g. IDEMPOTENCY_MISMATCH, ALREADY_EXISTS)."""


class SandboxNotRunningError(APIError, RuntimeError):
    """The sandbox is not RUNNING: still starting, PAUSED, or ended (`details['status']` says which).

    A RuntimeError as in prime_sandboxes, with its attributes: `sandbox_id`, `sandbox_status` (also
    `details['status']`; `status` stays the HTTP status), `error_type` and `command`.
    """

    def __init__(self, message: str, **kw: Any) -> None:
        self.sandbox_id: Optional[str] = kw.pop("sandbox_id", None)
        self.error_type: Optional[str] = kw.pop("error_type", None)
        self.command: Optional[str] = kw.pop("command", None)
        super().__init__(message, **kw)
        self.sandbox_status: Optional[str] = self.details.get("status")
        if self.sandbox_id is None and isinstance(self.details.get("sandbox_id"), str):
            self.sandbox_id = self.details["sandbox_id"]


class SandboxTimeoutError(SandboxNotRunningError):
    """The sandbox reached its lifetime or idle timeout (status TIMEOUT)."""


class SandboxOOMError(SandboxNotRunningError):
    """The sandbox ended because its memory ran out (error_type OOM_KILLED)."""


class SandboxImagePullError(SandboxNotRunningError):
    """The image could not be pulled or is not usable (registry unreachable, unauthorized, invalid)."""


class SandboxWaitTimeoutError(SandboxNotRunningError, TimeoutError):
    """A wait for RUNNING ran out of time: prime_sandboxes raises SandboxNotRunningError there,
    sandtree's own client raised TimeoutError; this is both."""


class CommandTimeoutError(APIError, RuntimeError):
    """A command ran past its timeout and was killed (a RuntimeError, as in prime_sandboxes)."""


class UploadTimeoutError(APIError, RuntimeError):
    """An upload did not finish within its `timeout` (a RuntimeError, as in prime_sandboxes)."""


class DownloadTimeoutError(APIError, RuntimeError):
    """A download did not finish within its `timeout` (a RuntimeError, as in prime_sandboxes)."""


class CheckpointFailedError(APIError, RuntimeError):
    """A checkpoint is FAILED (or was deleted) and will never be DURABLE."""


class RateLimitError(APIError):
    """Too many requests or creations: retry after `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class BudgetExceededError(RateLimitError, PaymentRequiredError):
    """A team quota (sandboxes, vCPUs, memory, storage) or the team's monthly budget (402
    BUDGET_EXCEEDED) is used up: end sandboxes, or ask an admin to raise the limit or the budget."""


class ServerError(APIError):
    """The server failed (5xx): retry; if it persists, check the server's log."""


class SandboxVMError(ServerError):
    """The sandbox's VM or its guest agent failed or did not answer (GUEST_ERROR, VM_ERROR,
    VM_UNRESPONSIVE, VM_START_FAILED): read the sandbox's logs; create a new sandbox if it ended."""


_BY_CODE: Dict[str, Type[APIError]] = {
    "BAD_REQUEST": ValidationError,
    "VALIDATION_FAILED": ValidationError,
    "INVALID_PATH": ValidationError,
    "PAYLOAD_TOO_LARGE": SandboxFileTooLargeError,
    "UNSUPPORTED_MEDIA_TYPE": ValidationError,
    "CHECKPOINT_CORRUPT": ValidationError,
    "METHOD_NOT_ALLOWED": APIError,
    "UNAUTHORIZED": UnauthorizedError,
    "PORT_TOKEN_INVALID": UnauthorizedError,
    "FORBIDDEN": ForbiddenError,
    "NOT_FOUND": NotFoundError,
    "ROUTE_NOT_FOUND": NotFoundError,
    "TEAM_NOT_FOUND": NotFoundError,
    "KEY_NOT_FOUND": NotFoundError,
    "HOST_NOT_FOUND": NotFoundError,
    "PORT_NOT_FOUND": NotFoundError,
    "SANDBOX_NOT_FOUND": SandboxNotFoundError,
    "FILE_NOT_FOUND": SandboxFileNotFoundError,
    "CHECKPOINT_NOT_FOUND": CheckpointNotFoundError,
    "VOLUME_NOT_FOUND": NotFoundError,
    "VOLUME_IN_USE": ConflictError,
    "VOLUME_FULL": ServerError,
    "VOLUME_BOUND_UNAVAILABLE": ServerError,
    "UNSAFE_PATH": ValidationError,
    "JOB_NOT_FOUND": JobNotFoundError,
    "IMAGE_NOT_FOUND": SandboxImagePullError,
    "IMAGE_PULL_FAILED": SandboxImagePullError,
    "REGISTRY_UNAUTHORIZED": SandboxImagePullError,
    "REGISTRY_UNREACHABLE": SandboxImagePullError,
    "IMAGE_INVALID": SandboxImagePullError,
    "SANDBOX_NOT_RUNNING": SandboxNotRunningError,
    "CHECKPOINT_FAILED": CheckpointFailedError,
    "CONFLICT": ConflictError,
    "ALREADY_EXISTS": ConflictError,
    "IS_A_DIRECTORY": ConflictError,
    "NOT_A_DIRECTORY": ConflictError,
    "DIRECTORY_NOT_EMPTY": ConflictError,
    "IDEMPOTENCY_MISMATCH": ConflictError,
    "CHECKPOINT_NOT_READY": ConflictError,
    "CHECKPOINT_HAS_NO_MEMORY": ConflictError,
    "MEMORY_STATE_INCOMPATIBLE": ConflictError,
    "NETWORK_DISABLED": ConflictError,
    "NETWORK_UNAVAILABLE": ConflictError,
    "NO_DISPLAY": ConflictError,
    "OUT_OF_DISPLAY": ValidationError,
    "DESKTOP_ACTION_FAILED": ValidationError,
    "EXCEEDS_HOST_CAPACITY": ValidationError,
    "NESTED_VIRT_UNAVAILABLE": ValidationError,
    "RATE_LIMITED": RateLimitError,
    "RATE_LIMIT_HOURLY": RateLimitError,
    "RATE_LIMIT_BURST": RateLimitError,
    "QUOTA_SANDBOXES": BudgetExceededError,
    "QUOTA_VCPUS": BudgetExceededError,
    "QUOTA_MEMORY": BudgetExceededError,
    "QUOTA_STORAGE": BudgetExceededError,
    "QUOTA_VOLUMES": BudgetExceededError,
    "QUOTA_VOLUME_STORAGE": BudgetExceededError,
    "BUDGET_EXCEEDED": BudgetExceededError,
    "INTERNAL": ServerError,
    "NETWORK_SETUP_FAILED": ServerError,
    "UNAVAILABLE": ServerError,
    "NO_CAPACITY": ServerError,
    "HOST_LOST": ServerError,
    "HOST_UNSCHEDULABLE": ConflictError,
    "WORKER_UNREACHABLE": ServerError,
    "NOT_ON_REMOTE_HOST": ServerError,
    "NOT_SUPPORTED": ServerError,
    "BLOB_STORE_MISMATCH": ConflictError,
    "CHECKPOINT_NOT_ON_HOST": ConflictError,
    "VOLUME_NOT_ON_HOST": ConflictError,
    "VOLUME_IN_USE_ELSEWHERE": ConflictError,
    "VOLUME_LOST": NotFoundError,
    "KEY_MISMATCH": ServerError,
    "HOST_DISK_FULL": ServerError,
    "HOST_COMMAND_FAILED": ServerError,
    "TIMEOUT": ServerError,
    "GUEST_ERROR": SandboxVMError,
    "VM_ERROR": SandboxVMError,
    "VM_UNRESPONSIVE": SandboxVMError,
    "VM_START_FAILED": SandboxVMError,
    "VOLUME_MOUNT_FAILED": SandboxVMError,
}


def error_for(
    code: str,
    message: str,
    *,
    status: int,
    details: Optional[Dict[str, Any]] = None,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> APIError:
    """The typed error of a server answer, by its code; only a code this client does not know
    (a newer server, a proxy) falls back on the HTTP status."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = ServerError if status >= 500 else NotFoundError if status == 404 else APIError
    kw: Dict[str, Any] = {"code": code, "status": status, "details": details, "request_id": request_id}
    if issubclass(cls, RateLimitError):
        return cls(message, retry_after=retry_after, **kw)
    return cls(message, **kw)
