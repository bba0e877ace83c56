"""Python client of sandtree, the self-hosted microVM sandbox platform.

Names follow prime_sandboxes, so ported code changes its import line::

    from sandtree import SandboxClient, CreateSandboxRequest
"""

from __future__ import annotations

from ._version import __version__
from .api_client import APIClient, AsyncAPIClient
from .async_sandbox_client import AsyncSandboxClient
from .errors import (
    APIConnectionError,
    APIError,
    BudgetExceededError,
    CheckpointFailedError,
    CheckpointNotFoundError,
    CommandTimeoutError,
    ConflictError,
    ForbiddenError,
    InvalidResponseError,
    JobNotFoundError,
    NotFoundError,
    RateLimitError,
    SandboxFileNotFoundError,
    SandboxImagePullError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxTimeoutError,
    SandboxVMError,
    ServerError,
    UnauthorizedError,
    ValidationError,
)
from .models import (
    BackgroundJob,
    BackgroundJobStatus,
    BulkDeleteSandboxResponse,
    Checkpoint,
    CheckpointState,
    CommandResponse,
    CreateSandboxRequest,
    ExecEvent,
    ExposedPort,
    FileUploadResponse,
    Sandbox,
    SandboxListResponse,
    SandboxNetwork,
    SandboxStatus,
    SandboxStatusEntry,
    SandboxStatuses,
)
from .sandbox_client import SandboxClient

__all__ = [
    "__version__",
    "APIClient",
    "AsyncAPIClient",
    "SandboxClient",
    "AsyncSandboxClient",
    "APIError",
    "APIConnectionError",
    "BudgetExceededError",
    "CheckpointFailedError",
    "CheckpointNotFoundError",
    "CommandTimeoutError",
    "ConflictError",
    "ForbiddenError",
    "InvalidResponseError",
    "JobNotFoundError",
    "NotFoundError",
    "RateLimitError",
    "SandboxFileNotFoundError",
    "SandboxImagePullError",
    "SandboxNotFoundError",
    "SandboxNotRunningError",
    "SandboxTimeoutError",
    "SandboxVMError",
    "ServerError",
    "UnauthorizedError",
    "ValidationError",
    "BackgroundJob",
    "BackgroundJobStatus",
    "BulkDeleteSandboxResponse",
    "Checkpoint",
    "CheckpointState",
    "CommandResponse",
    "CreateSandboxRequest",
    "ExecEvent",
    "ExposedPort",
    "FileUploadResponse",
    "Sandbox",
    "SandboxListResponse",
    "SandboxNetwork",
    "SandboxStatus",
    "SandboxStatusEntry",
    "SandboxStatuses",
]
