"""Trajectories: every action of an episode (command, file write, fork, reset, checkpoint,
verify, and on a desktop every desktop action) as one event with timestamps, exit code and output
digests, exported as JSONL. A desktop event carries the server's DesktopEvent whole (`desktop`:
seq, action, screens' sha256 before and after, focused window, pointer, element)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Union

# Events a replay runs again; the others (fork, reset, checkpoint) mark states to restart from.
REPLAYED = ("command", "file_write")
STATE_EVENTS = ("fork", "reset", "checkpoint")


def digest(data: Union[str, bytes]) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


@dataclass
class Event:
    type: str
    episode_id: str
    sandbox_id: str
    started_at: float
    ended_at: float
    command: Optional[Any] = None
    exit_code: Optional[int] = None
    stdout_sha256: Optional[str] = None
    stderr_sha256: Optional[str] = None
    path: Optional[str] = None
    data_b64: Optional[str] = None
    data_sha256: Optional[str] = None
    checkpoint_id: Optional[str] = None
    reward: Optional[float] = None
    desktop: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Event:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]

    @property
    def data(self) -> bytes:
        return base64.b64decode(self.data_b64 or "")

    def same_outcome(self, other: Event) -> bool:
        """The same action with the same results (digests and exit code), timestamps aside."""
        keys = ("type", "command", "exit_code", "stdout_sha256", "stderr_sha256", "path", "data_sha256")
        return all(getattr(self, k) == getattr(other, k) for k in keys)


@dataclass
class Trajectory:
    episode_id: str
    events: List[Event] = field(default_factory=list)

    def add(self, type: str, sandbox_id: str, started_at: float, **kw: Any) -> Event:
        e = Event(type, self.episode_id, sandbox_id, started_at, time.time(), **kw)
        self.events.append(e)
        return e

    def steps(self) -> List[Event]:
        return [e for e in self.events if e.type in REPLAYED]

    def desktop_events(self) -> List[Dict[str, Any]]:
        """The desktop's events this trajectory carries (DesktopEvents, by seq)."""
        return [e.desktop for e in self.events if e.type == "desktop" and e.desktop is not None]

    def add_desktop(self, sandbox_id: str, event: Dict[str, Any]) -> Optional[Event]:
        """Records a DesktopEvent once (by seq): the same event read again is not added twice."""
        if any(d.get("seq") == event.get("seq") for d in self.desktop_events()):
            return None
        e = Event("desktop", self.episode_id, sandbox_id, _epoch(event.get("started_at")), _epoch(event.get("ended_at")), desktop=event)
        self.events.append(e)
        return e

    def to_jsonl(self) -> str:
        return "".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in self.events)

    @classmethod
    def from_jsonl(cls, text: Union[str, Iterable[str]]) -> Trajectory:
        lines = text.splitlines() if isinstance(text, str) else list(text)
        events = [Event.from_dict(json.loads(line)) for line in lines if line.strip()]
        return cls(events[0].episode_id if events else "", events)


def _epoch(iso: Any) -> float:
    """The guest's ISO 8601 time of a DesktopEvent as seconds since the epoch (now if absent)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def command_event(tr: Trajectory, sandbox_id: str, started_at: float, command: Any, exit_code: int, stdout: str, stderr: str, type: str = "command", reward: Optional[float] = None) -> Event:
    return tr.add(
        type, sandbox_id, started_at, command=command, exit_code=exit_code,
        stdout_sha256=digest(stdout), stderr_sha256=digest(stderr), reward=reward,
    )


def write_event(tr: Trajectory, sandbox_id: str, started_at: float, path: str, data: bytes) -> Event:
    return tr.add(
        "file_write", sandbox_id, started_at, path=path,
        data_b64=base64.b64encode(data).decode(), data_sha256=digest(data),
    )
