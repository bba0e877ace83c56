"""Models of commands: buffered and streamed results, background jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from ._parsing import _FromAnswer


@dataclass
class CommandResponse(_FromAnswer):
    _KIND = "command result"

    stdout: str
    stderr: str
    exit_code: int
    signal: Optional[int] = None
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float = 0.0
    exec_id: Optional[str] = None


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


@dataclass
class BackgroundJob(_FromAnswer):
    """A started job. sandtree's server keeps its output and exit status itself (no files in the guest),
    so prime_sandboxes' `stdout_log_file`, `stderr_log_file` and `exit_file` are None."""

    _KIND = "job"

    job_id: str
    sandbox_id: str
    command: str
    started_at: Optional[datetime] = None
    stdout_log_file: Optional[str] = None
    stderr_log_file: Optional[str] = None
    exit_file: Optional[str] = None


@dataclass
class BackgroundJobStatus(_FromAnswer):
    """A job's state; `stdout`/`stderr` are the last 16 KiB of each stream."""

    _KIND = "job"
    _READERS = {
        "completed": lambda d: d["status"] != "RUNNING",
        "stdout": lambda d: str(d.get("stdout_tail", "")),
        "stderr": lambda d: str(d.get("stderr_tail", "")),
    }

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
    # prime_sandboxes' per-stream read errors: the server reads both streams itself, so None.
    stdout_error: Optional[str] = None
    stderr_error: Optional[str] = None


@dataclass
class BackgroundJobStatusSnapshot:
    """A job's state without its output (`get_background_job_status`)."""

    sandbox_id: str
    job_id: str
    completed: bool
    exit_code: Optional[int] = None

    @classmethod
    def of(cls, sandbox_id: str, s: BackgroundJobStatus) -> BackgroundJobStatusSnapshot:
        return cls(sandbox_id, s.job_id, s.completed, s.exit_code)
