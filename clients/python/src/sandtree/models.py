"""Models of the API, named after prime_sandboxes' so that ported code keeps its field names.

Answers are parsed with `from_dict`, which checks the fields this client relies on (a missing
or mistyped one is an InvalidResponseError) and ignores fields it does not know (newer servers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Dict, List, Optional

from .errors import InvalidResponseError


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


class CheckpointState(str, Enum):
    PENDING = "PENDING"
    FROZEN = "FROZEN"
    DURABLE = "DURABLE"
    FAILED = "FAILED"
    DELETING = "DELETING"


def _dt(value: Any) -> Optional[datetime]:
    if value is None:
        return None
    # Python 3.9's fromisoformat does not take the "Z" suffix the server writes.
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _parse(kind: str, data: Any, build: Any) -> Any:
    try:
        return build(data)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidResponseError(f"unexpected {kind} in the answer: {e!r}", code="INVALID_RESPONSE") from e


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


@dataclass
class CommandResponse:
    stdout: str
    stderr: str
    exit_code: int
    signal: Optional[int] = None
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float = 0.0
    exec_id: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> CommandResponse:
        def build(d: Dict[str, Any]) -> CommandResponse:
            return cls(
                stdout=str(d["stdout"]),
                stderr=str(d["stderr"]),
                exit_code=int(d["exit_code"]),
                signal=d.get("signal"),
                timed_out=bool(d.get("timed_out", False)),
                stdout_truncated=bool(d.get("stdout_truncated", False)),
                stderr_truncated=bool(d.get("stderr_truncated", False)),
                duration_ms=float(d.get("duration_ms", 0)),
                exec_id=d.get("exec_id"),
            )

        result: CommandResponse = _parse("command result", d, build)
        return result


@dataclass
class BackgroundJob:
    job_id: str
    sandbox_id: str
    command: str
    started_at: Optional[datetime] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> BackgroundJob:
        result: BackgroundJob = _parse(
            "job",
            d,
            lambda d: cls(
                job_id=str(d["job_id"]),
                sandbox_id=str(d["sandbox_id"]),
                command=str(d["command"]),
                started_at=_dt(d.get("started_at")),
            ),
        )
        return result


@dataclass
class BackgroundJobStatus:
    """A job's state; `stdout`/`stderr` are the last 16 KiB of each stream."""

    job_id: str
    status: str
    completed: bool
    exit_code: Optional[int]
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    ended_at: Optional[datetime] = None
    error_reason: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> BackgroundJobStatus:
        result: BackgroundJobStatus = _parse(
            "job",
            d,
            lambda d: cls(
                job_id=str(d["job_id"]),
                status=str(d["status"]),
                completed=d["status"] != "RUNNING",
                exit_code=d.get("exit_code"),
                stdout=str(d.get("stdout_tail", "")),
                stderr=str(d.get("stderr_tail", "")),
                stdout_truncated=bool(d.get("stdout_truncated", False)),
                stderr_truncated=bool(d.get("stderr_truncated", False)),
                ended_at=_dt(d.get("ended_at")),
                error_reason=d.get("error_reason"),
            ),
        )
        return result


@dataclass
class FileUploadResponse:
    path: str
    bytes: int
    success: bool = True


@dataclass
class Checkpoint:
    id: str
    sandbox_id: str
    state: CheckpointState
    parent_id: Optional[str] = None
    team_id: Optional[str] = None
    depth: int = 0
    image: Optional[str] = None
    disk_size_bytes: int = 0
    stored_bytes: int = 0
    error: Optional[str] = None
    has_memory: bool = False
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Checkpoint:
        result: Checkpoint = _parse(
            "checkpoint",
            d,
            lambda d: cls(
                id=str(d["id"]),
                sandbox_id=str(d["sandbox_id"]),
                state=CheckpointState(d["state"]),
                parent_id=d.get("parent_id"),
                team_id=d.get("team_id"),
                depth=int(d.get("depth", 0)),
                image=d.get("image"),
                disk_size_bytes=int(d.get("disk_size_bytes", 0)),
                stored_bytes=int(d.get("stored_bytes", 0)),
                error=d.get("error"),
                has_memory=bool(d.get("has_memory", False)),
                created_at=_dt(d.get("created_at")),
                updated_at=_dt(d.get("updated_at")),
                expires_at=_dt(d.get("expires_at")),
            ),
        )
        return result


@dataclass
class ExposedPort:
    """A port of the sandbox reachable through the server at `url` (HTTP) and `tcp_url` (raw TCP);
    `token` is shown only when exposed."""

    sandbox_id: str
    port: int
    url: str
    tcp_url: str
    token: Optional[str] = None
    created_at: Optional[datetime] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> ExposedPort:
        result: ExposedPort = _parse(
            "exposed port",
            d,
            lambda d: cls(
                sandbox_id=str(d["sandbox_id"]),
                port=int(d["port"]),
                url=str(d["url"]),
                tcp_url=str(d["tcp_url"]),
                token=d.get("token"),
                created_at=_dt(d.get("created_at")),
            ),
        )
        return result


@dataclass
class SandboxNetwork:
    sandbox_id: str
    enabled: bool
    mode: str
    address: Optional[str] = None
    gateway: Optional[str] = None
    network_allowlist: List[str] = field(default_factory=list)
    network_denylist: List[str] = field(default_factory=list)
    tunnels: List[Dict[str, str]] = field(default_factory=list)
    applied: bool = False

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> SandboxNetwork:
        result: SandboxNetwork = _parse(
            "network",
            d,
            lambda d: cls(
                sandbox_id=str(d["sandbox_id"]),
                enabled=bool(d["enabled"]),
                mode=str(d["mode"]),
                address=d.get("address"),
                gateway=d.get("gateway"),
                network_allowlist=list(d.get("network_allowlist") or []),
                network_denylist=list(d.get("network_denylist") or []),
                tunnels=list(d.get("tunnels") or []),
                applied=bool(d.get("applied", False)),
            ),
        )
        return result


@dataclass
class ExecEvent:
    """One event of a streamed command: "started" (exec_id, pid), "stdout"/"stderr" (data), "exit"."""

    type: str
    data: bytes = b""
    exec_id: Optional[str] = None
    pid: Optional[int] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: bool = False

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")
