"""Models of the API, named after prime_sandboxes' so that ported code keeps its field names.

Answers are parsed with `from_dict`, which checks the fields this client relies on (a missing
or mistyped one is an InvalidResponseError) and ignores fields it does not know (newer servers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Dict, List, Optional

from ._parsing import _dt, _parse
from .command_models import BackgroundJob, BackgroundJobStatus, CommandResponse, ExecEvent
from .resource_models import Checkpoint, CheckpointState, ExposedPort, FileUploadResponse, SandboxNetwork


class SandboxStatus(str, Enum):
    PENDING = "PENDING"
    PROVISIONING = "PROVISIONING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"
    TIMEOUT = "TIMEOUT"

    @property
    def is_terminal(self) -> bool:
        return self in (SandboxStatus.TERMINATED, SandboxStatus.ERROR, SandboxStatus.TIMEOUT)


@dataclass
class CreateSandboxRequest:
    """What `create` takes. `docker_image` is the image reference (sent as the API's `image`)."""

    docker_image: Optional[str] = None
    name: Optional[str] = None
    start_command: Optional[str] = None
    cpu_cores: Optional[int] = None
    memory_gb: Optional[float] = None
    disk_size_gb: Optional[int] = None
    timeout_minutes: Optional[float] = None
    idle_timeout_minutes: Optional[float] = None
    environment_vars: Optional[Dict[str, str]] = None
    secrets: Optional[Dict[str, str]] = None
    labels: Optional[Dict[str, str]] = None
    network_allowlist: Optional[List[str]] = None
    network_denylist: Optional[List[str]] = None
    # Accepted for prime_sandboxes compatibility; a sandtree key belongs to one team already.
    team_id: Optional[str] = None
    idempotency_key: Optional[str] = None
    checkpoint_id: Optional[str] = None
    restore_memory: Optional[bool] = None
    tunnels: Optional[Dict[str, str]] = None
    network: Optional[bool] = None
    # A desktop (image sandtree/desktop): {"width": 1280, "height": 800}; None: no display.
    display: Optional[Dict[str, Any]] = None
    # Fleet mode: run it on this host (admin keys only; GET /v1/hosts lists them).
    host: Optional[str] = None

    def to_wire(self) -> Dict[str, Any]:
        if self.docker_image is None and self.checkpoint_id is None:
            raise ValueError("give docker_image, or checkpoint_id to restore a checkpoint")
        body: Dict[str, Any] = {}
        if self.docker_image is not None:
            body["image"] = self.docker_image
        for key in (
            "name",
            "start_command",
            "cpu_cores",
            "memory_gb",
            "disk_size_gb",
            "timeout_minutes",
            "idle_timeout_minutes",
            "environment_vars",
            "secrets",
            "labels",
            "network_allowlist",
            "network_denylist",
            "idempotency_key",
            "checkpoint_id",
            "restore_memory",
            "tunnels",
            "network",
            "display",
            "host",
        ):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return body


@dataclass
class Sandbox:
    id: str
    name: Optional[str]
    docker_image: str
    status: SandboxStatus
    cpu_cores: int
    memory_gb: float
    disk_size_gb: int
    team_id: str
    environment_vars: Dict[str, str] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)
    secrets: Dict[str, str] = field(default_factory=dict)
    start_command: Optional[str] = None
    image_digest: Optional[str] = None
    error_reason: Optional[str] = None
    timeout_minutes: Optional[float] = None
    idle_timeout_minutes: Optional[float] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    terminated_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    last_activity_at: Optional[datetime] = None
    start_path: Optional[str] = None
    source_checkpoint_id: Optional[str] = None
    head_checkpoint_id: Optional[str] = None
    # The fleet host that runs it ("local": the server's own); admin keys only, None otherwise.
    host: Optional[str] = None

    @property
    def image(self) -> str:
        return self.docker_image

    @property
    def error_message(self) -> Optional[str]:
        """prime_sandboxes' name of `error_reason`."""
        return self.error_reason

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Sandbox:
        def build(d: Dict[str, Any]) -> Sandbox:
            return cls(
                id=str(d["id"]),
                name=d.get("name"),
                docker_image=str(d["image"]),
                status=SandboxStatus(d["status"]),
                cpu_cores=int(d["cpu_cores"]),
                memory_gb=float(d["memory_gb"]),
                disk_size_gb=int(d["disk_size_gb"]),
                team_id=str(d["team_id"]),
                environment_vars=dict(d.get("environment_vars") or {}),
                labels=dict(d.get("labels") or {}),
                secrets=dict(d.get("secrets") or {}),
                start_command=d.get("start_command"),
                image_digest=d.get("image_digest"),
                error_reason=d.get("error_reason"),
                timeout_minutes=d.get("timeout_minutes"),
                idle_timeout_minutes=d.get("idle_timeout_minutes"),
                created_at=_dt(d.get("created_at")),
                updated_at=_dt(d.get("updated_at")),
                started_at=_dt(d.get("started_at")),
                terminated_at=_dt(d.get("terminated_at")),
                expires_at=_dt(d.get("expires_at")),
                last_activity_at=_dt(d.get("last_activity_at")),
                start_path=d.get("start_path"),
                source_checkpoint_id=d.get("source_checkpoint_id"),
                head_checkpoint_id=d.get("head_checkpoint_id"),
                host=d.get("host"),
            )

        result: Sandbox = _parse("sandbox", d, build)
        return result


@dataclass
class SandboxListResponse:
    sandboxes: List[Sandbox]
    next_cursor: Optional[str]

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None


@dataclass
class SandboxStatusEntry:
    id: str
    status: SandboxStatus
    error_reason: Optional[str] = None


@dataclass
class SandboxStatuses:
    """Answer of `get_sandbox_statuses`: `statuses` by id; unknown ids in `not_found`."""

    statuses: Dict[str, SandboxStatusEntry]
    not_found: List[str]


@dataclass
class BulkDeleteSandboxResponse:
    deleted: List[str]
    not_found: List[str]


__all__ = [
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
