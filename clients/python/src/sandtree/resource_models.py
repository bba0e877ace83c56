"""Models of checkpoints, files, exposed ports and networks."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Dict, List, Optional

from ._parsing import _FromAnswer


class CheckpointState(str, Enum):
    PENDING = "PENDING"
    FROZEN = "FROZEN"
    DURABLE = "DURABLE"
    FAILED = "FAILED"
    DELETING = "DELETING"


@dataclass
class Checkpoint(_FromAnswer):
    _KIND = "checkpoint"

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

    @property
    def docker_image(self) -> Optional[str]:
        """prime_sandboxes' name of `image`."""
        return self.image

    @property
    def occupied_bytes(self) -> int:
        """prime_sandboxes' name: the bytes this checkpoint keeps in the store (`stored_bytes`)."""
        return self.stored_bytes


@dataclass
class FileUploadResponse:
    path: str
    bytes: int
    success: bool = True
    timestamp: Optional[datetime] = None

    @property
    def size(self) -> int:
        """prime_sandboxes' name of `bytes`."""
        return self.bytes


@dataclass
class ReadFileResponse:
    """A file, or the window of it asked for: `size` bytes of `content` (str, or bytes with
    encoding=None) from `offset`; `total_size` is the file's; `truncated` when bytes follow."""

    content: Any
    size: int
    total_size: Optional[int] = None
    offset: Optional[int] = None
    truncated: Optional[bool] = None

    def __str__(self) -> str:
        return self.content if isinstance(self.content, str) else self.content.decode("utf-8", "replace")


@dataclass
class SandboxEgressPolicy:
    allowlist: Optional[List[str]] = None
    denylist: Optional[List[str]] = None


@dataclass
class CheckpointLookupError:
    checkpoint_id: str
    code: str
    message: str


CheckpointDeleteError = CheckpointLookupError


@dataclass
class BatchCheckpointResponse:
    checkpoints: List[Checkpoint]
    errors: List[CheckpointLookupError]


@dataclass
class DeleteSandboxCheckpointsResponse:
    deleted: List[str]
    errors: List[CheckpointLookupError]


@dataclass
class ExposedPort(_FromAnswer):
    """A port of the sandbox reachable through the server at `url` (HTTP) and `tcp_url` (raw TCP);
    `token` is shown only when exposed."""

    _KIND = "exposed port"

    sandbox_id: str
    port: int
    url: str
    tcp_url: str
    token: Optional[str] = None
    created_at: Optional[datetime] = None


@dataclass
class SandboxNetwork(_FromAnswer):
    _KIND = "network"

    sandbox_id: str
    enabled: bool
    mode: str
    address: Optional[str] = None
    gateway: Optional[str] = None
    network_allowlist: List[str] = field(default_factory=list)
    network_denylist: List[str] = field(default_factory=list)
    tunnels: List[Dict[str, str]] = field(default_factory=list)
    applied: bool = False

    @property
    def policy(self) -> SandboxEgressPolicy:
        """prime_sandboxes' view of the two lists (None where a list is empty)."""
        return SandboxEgressPolicy(self.network_allowlist or None, self.network_denylist or None)

    @property
    def generation(self) -> Optional[int]:
        """prime_sandboxes numbers policy versions; sandtree does not (None): read `applied`."""
        return None

    @property
    def applied_generation(self) -> Optional[int]:
        return None


class VolumeState(str, Enum):
    CREATING = "CREATING"
    READY = "READY"
    MOVING = "MOVING"
    DELETING = "DELETING"
    DELETED = "DELETED"


@dataclass
class VolumeInfo(_FromAnswer):
    """Storage that outlives sandboxes (docs/volumes.md); every call takes its id or its name."""

    _KIND = "volume"
    _READERS = {"synced_bytes": lambda d: None if d.get("synced_bytes") is None else int(d["synced_bytes"])}

    id: str
    name: str
    status: VolumeState
    size_gb: int
    used_bytes: int = 0
    team_id: Optional[str] = None
    labels: Dict[str, str] = field(default_factory=dict)
    mounted_by: List[str] = field(default_factory=list)
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    #: Fleet with an object store: when its last copy in the bucket was taken (None: never).
    synced_at: Optional[datetime] = None
    #: The size in bytes of that copy.
    synced_bytes: Optional[int] = None
    #: Its home host was lost then and it was not brought back yet (docs/fleet.md).
    home_lost_at: Optional[datetime] = None
    #: Brought back from the bucket after its host was lost: its files are as of this time.
    restored_as_of: Optional[datetime] = None
