"""Models of the API, named after prime_sandboxes' so that ported code keeps its field names.

Answers are parsed with `from_dict`, which checks the fields this client relies on (a missing
or mistyped one is an InvalidResponseError) and ignores fields it does not know (newer servers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Dict, List, Optional

from . import _prime_args as pa
from ._parsing import _dt, _parse
from .command_models import BackgroundJob, BackgroundJobStatus, BackgroundJobStatusSnapshot, CommandResponse, ExecEvent
from .resource_models import (
    BatchCheckpointResponse,
    Checkpoint,
    CheckpointDeleteError,
    CheckpointLookupError,
    CheckpointState,
    DeleteSandboxCheckpointsResponse,
    ExposedPort,
    FileUploadResponse,
    ReadFileResponse,
    SandboxEgressPolicy,
    SandboxNetwork,
)


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
    """What `create` takes, with prime_sandboxes' field names. `docker_image` is the image reference
    (sent as the API's `image`); `labels` a dict, or prime_sandboxes' list ("k=v" or "k"). Fields of
    Prime's platform that sandtree has no counterpart of (GPUs, regions, LAN networks, volumes,
    advanced configs, arm64) are refused by `create` when set."""

    docker_image: Optional[str] = None
    name: Optional[str] = None
    start_command: Optional[Any] = None
    cpu_cores: Optional[float] = None
    memory_gb: Optional[float] = None
    disk_size_gb: Optional[float] = None
    timeout_minutes: Optional[float] = None
    idle_timeout_minutes: Optional[float] = None
    environment_vars: Optional[Dict[str, str]] = None
    secrets: Optional[Dict[str, str]] = None
    labels: Optional[Any] = None
    network_allowlist: Optional[List[str]] = None
    network_denylist: Optional[List[str]] = None
    # A sandtree key belongs to one team: `create` checks the sandbox landed in this one.
    team_id: Optional[str] = None
    idempotency_key: Optional[str] = None
    checkpoint_id: Optional[str] = None
    restore_memory: Optional[bool] = None
    tunnels: Optional[Dict[str, str]] = None
    network: Optional[bool] = None
    # A desktop (image sandtree/desktop): {"width": 1280, "height": 800}; None: no display.
    display: Optional[Dict[str, Any]] = None
    # Hardware virtualization inside the sandbox (its own /dev/kvm); off by default.
    nested_virtualization: Optional[bool] = None
    # Fleet mode: run it on this host (admin keys only; GET /v1/hosts lists them).
    host: Optional[str] = None
    # prime_sandboxes' fields of its own platform: refused when set (see _prime_args.WHY).
    arch: Optional[str] = None
    gpu_count: int = 0
    gpu_type: Optional[str] = None
    region: Optional[str] = None
    advanced_configs: Optional[Any] = None
    lan_network_id: Optional[str] = None
    lan_tags: Optional[List[str]] = None
    volumes: Optional[List[Any]] = None
    # With checkpoint_id: the source sandbox's volumes, "shared" (default) or "snapshot" (copies).
    restore_volumes: Optional[str] = None

    def to_wire(self) -> Dict[str, Any]:
        if self.docker_image is None and self.checkpoint_id is None:
            raise ValueError("give docker_image, or checkpoint_id to restore a checkpoint")
        pa.arch(self.arch)
        own = ("gpu_count", "gpu_type", "region", "advanced_configs", "lan_network_id", "lan_tags", "volumes")
        pa.check_unset({k: getattr(self, k) for k in own}, pa.WHY)
        body: Dict[str, Any] = {}
        if self.docker_image is not None:
            body["image"] = self.docker_image
        for key in (
            "name",
            "memory_gb",
            "timeout_minutes",
            "idle_timeout_minutes",
            "environment_vars",
            "secrets",
            "network_allowlist",
            "network_denylist",
            "idempotency_key",
            "checkpoint_id",
            "restore_memory",
            "tunnels",
            "network",
            "display",
            "nested_virtualization",
            "host",
        ):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        if self.restore_volumes is not None:
            body["volumes"] = self.restore_volumes
        extra = {
            "start_command": pa.start_command(self.start_command),
            "cpu_cores": pa.whole_cores(self.cpu_cores),
            "disk_size_gb": pa.whole_gb(self.disk_size_gb),
            "labels": pa.labels_dict(self.labels),
        }
        body.update({k: v for k, v in extra.items() if v is not None})
        return body


@dataclass
class SandboxVolume:
    """A volume a sandbox mounts: its id, name, guest path and whether read-only."""

    volume_id: str
    name: str
    path: str
    read_only: bool = False


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
    # Why it ended in ERROR, a stable code (START_FAILED, GUEST_RESET, MACHINE_EXITED, ...).
    error_code: Optional[str] = None
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
    # prime_sandboxes' fields. Every sandtree sandbox is a microVM whose disk is its root, without
    # GPUs, users within a team, regions or image builds: those fields say so.
    vm: bool = True
    disk_mount_path: str = "/"
    gpu_count: int = 0
    gpu_type: Optional[str] = None
    network_allowlist: Optional[List[str]] = None
    network_denylist: Optional[List[str]] = None
    termination_reason: Optional[str] = None
    error_type: Optional[str] = None
    exit_code: Optional[int] = None
    advanced_configs: Optional[Dict[str, Any]] = None
    user_id: Optional[str] = None
    region: Optional[str] = None
    pending_image_build_id: Optional[str] = None
    # The fleet host that runs it ("local": the server's own); admin keys only, None otherwise.
    host: Optional[str] = None
    volumes: List[SandboxVolume] = field(default_factory=list)

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
                error_code=d.get("error_code"),
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
                network_allowlist=d.get("network_allowlist"),
                network_denylist=d.get("network_denylist"),
                termination_reason=d.get("termination_reason"),
                error_type=d.get("error_type") or ("TIMEOUT" if d["status"] == "TIMEOUT" else None),
                host=d.get("host"),
                volumes=[
                    SandboxVolume(str(v["volume_id"]), str(v["name"]), str(v["path"]), bool(v.get("read_only")))
                    for v in d.get("volumes") or []
                ],
            )

        result: Sandbox = _parse("sandbox", d, build)
        return result


@dataclass
class SandboxListResponse:
    """One page of `list`: prime_sandboxes' page fields, or with `cursor=` the server's `next_cursor`."""

    sandboxes: List[Sandbox]
    total: Optional[int] = None
    page: Optional[int] = None
    per_page: Optional[int] = None
    has_next: bool = False
    next_cursor: Optional[str] = None


@dataclass
class SandboxStatusSnapshot:
    """One sandbox of `get_sandbox_statuses`; `error_reason` is sandtree's name of `error_message`."""

    sandbox_id: str
    status: SandboxStatus
    error_type: Optional[str] = None
    error_message: Optional[str] = None
    pending_image_build_id: Optional[str] = None

    @property
    def id(self) -> str:
        return self.sandbox_id

    @property
    def error_reason(self) -> Optional[str]:
        return self.error_message


@dataclass
class SandboxStatusLookupError:
    """An id `get_sandbox_statuses` did not find (code SANDBOX_NOT_FOUND)."""

    sandbox_id: str
    code: str
    message: str


@dataclass
class BatchSandboxStatusResponse:
    """Answer of `get_sandbox_statuses`: a snapshot per found id (in the order asked), an error per other."""

    statuses: List[SandboxStatusSnapshot]
    errors: List[SandboxStatusLookupError]

    @property
    def not_found(self) -> List[str]:
        return [e.sandbox_id for e in self.errors]

    def by_id(self) -> Dict[str, SandboxStatusSnapshot]:
        return {s.sandbox_id: s for s in self.statuses}


# sandtree's earlier names of the same answer.
SandboxStatuses = BatchSandboxStatusResponse
SandboxStatusEntry = SandboxStatusSnapshot


@dataclass
class BulkDeleteSandboxResponse:
    """`succeeded`: deleted ids; `failed`: {"sandbox_id", "error"} for each other; `deleted` and
    `not_found` are sandtree's earlier names."""

    succeeded: List[str]
    failed: List[Dict[str, str]]
    message: str

    @property
    def deleted(self) -> List[str]:
        return self.succeeded

    @property
    def not_found(self) -> List[str]:
        return [f["sandbox_id"] for f in self.failed]


__all__ = [
    "BackgroundJob",
    "BackgroundJobStatus",
    "BackgroundJobStatusSnapshot",
    "BatchCheckpointResponse",
    "BatchSandboxStatusResponse",
    "CheckpointDeleteError",
    "CheckpointLookupError",
    "DeleteSandboxCheckpointsResponse",
    "ReadFileResponse",
    "SandboxEgressPolicy",
    "SandboxStatusLookupError",
    "SandboxStatusSnapshot",
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
    "SandboxVolume",
    "SandboxStatus",
    "SandboxStatusEntry",
    "SandboxStatuses",
]
