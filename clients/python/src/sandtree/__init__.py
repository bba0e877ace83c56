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
    APITimeoutError,
    BatchStatusUnsupportedError,
    DownloadTimeoutError,
    PaymentRequiredError,
    SandboxFileTooLargeError,
    SandboxOOMError,
    SandboxWaitTimeoutError,
    UploadTimeoutError,
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
from . import models as _models
from .models import (
    BackgroundJob,
    BackgroundJobStatus,
    BackgroundJobStatusSnapshot,
    BatchCheckpointResponse,
    BatchSandboxStatusResponse,
    BulkDeleteSandboxResponse,
    Checkpoint,
    CheckpointDeleteError,
    CheckpointLookupError,
    DeleteSandboxCheckpointsResponse,
    ReadFileResponse,
    SandboxEgressPolicy,
    SandboxStatusLookupError,
    SandboxStatusSnapshot,
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
    SandboxVolume,
)
from .resource_models import VolumeInfo, VolumeState
from .sandbox_client import SandboxClient

# prime_sandboxes' names of the same things.
SandboxCheckpoint = Checkpoint
EgressPolicyStatus = SandboxNetwork
TimeoutError = APITimeoutError  # noqa: A001 (prime_sandboxes exports this alias; the builtin stays `builtins.TimeoutError`)

__all__ = [
    "__version__",
    "VolumeInfo",
    "VolumeState",
    "APIClient",
    "AsyncAPIClient",
    "SandboxClient",
    "AsyncSandboxClient",
    "APIError",
    "APIConnectionError",
    "APITimeoutError",
    "BatchStatusUnsupportedError",
    "DownloadTimeoutError",
    "PaymentRequiredError",
    "SandboxFileTooLargeError",
    "SandboxOOMError",
    "SandboxWaitTimeoutError",
    "TimeoutError",
    "UploadTimeoutError",
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
    "EgressPolicyStatus",
    "SandboxCheckpoint",
    *_models.__all__,
]
