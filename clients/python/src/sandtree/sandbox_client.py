"""SandboxClient: the synchronous client, with prime_sandboxes' method names."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _calls as c
from . import _desktop_calls as dc
from ._calls import Command
from .api_client import APIClient
from .models import (
    BackgroundJob,
    BackgroundJobStatus,
    BulkDeleteSandboxResponse,
    Checkpoint,
    CommandResponse,
    ExecEvent,
    CreateSandboxRequest,
    ExposedPort,
    FileUploadResponse,
    Sandbox,
    SandboxListResponse,
    SandboxNetwork,
    SandboxStatus,
    SandboxStatuses,
)

CHUNK = 1 << 20


def _file_chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            yield chunk


def _upload_kw(remote_path: str, size: int) -> Dict[str, Any]:
    return {
        "params": {"path": remote_path},
        "headers": {"content-type": "application/octet-stream", "content-length": str(size)},
        "timeout": None,
    }


class SandboxClient:
    """Sandboxes of a sandtree server.

    ``SandboxClient()`` finds the server from SANDTREE_API_URL / SANDTREE_API_KEY, then the local
    server's credentials.env; ``SandboxClient(api_key=..., base_url=...)`` or
    ``SandboxClient(APIClient(...))`` say it explicitly.
    """

    def __init__(self, api_client: Optional[APIClient] = None, **kw: Any) -> None:
        self._owns = api_client is None
        self.client = api_client if api_client is not None else APIClient(**kw)

    def close(self) -> None:
        if self._owns:
            self.client.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _run(self, call: c.Call) -> Any:
        return call.parse(self.client.json(call.method, call.path, **call.kw))

    # Sandboxes

    def create(self, request: CreateSandboxRequest) -> Sandbox:
        """Creates a sandbox (PENDING until provisioned: see wait_for_creation)."""
        result: Sandbox = self._run(c.create(request))
        return result

    def get(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = self._run(c.get(sandbox_id))
        return result

    def list(
        self,
        status: Optional[Union[str, SandboxStatus]] = None,
        labels: Optional[Dict[str, str]] = None,
        per_page: int = 100,
        cursor: Optional[str] = None,
        host: Optional[str] = None,
    ) -> SandboxListResponse:
        """One page; pass `next_cursor` back as `cursor` for the next. `host`: only sandboxes on that
        fleet host (admin keys only)."""
        result: SandboxListResponse = self._run(c.list_(status, labels, per_page, cursor, host))
        return result

    def delete(self, sandbox_id: str) -> Sandbox:
        """Terminates the sandbox; deleting twice is fine."""
        result: Sandbox = self._run(c.delete(sandbox_id))
        return result

    def bulk_delete(
        self, sandbox_ids: Optional[List[str]] = None, labels: Optional[Dict[str, str]] = None
    ) -> BulkDeleteSandboxResponse:
        """Deletes the given sandboxes, or every not yet ended one carrying all of `labels`."""
        result: BulkDeleteSandboxResponse = self._run(c.bulk_delete(sandbox_ids, labels))
        return result

    def get_sandbox_statuses(self, sandbox_ids: Sequence[str]) -> SandboxStatuses:
        """Statuses of any number of sandboxes, 100 per call."""
        return c.merge_statuses([self._run(c.batch_status(ids)) for ids in c.chunks(sandbox_ids)])

    def wait_for_creation(self, sandbox_id: str, timeout: float = 300.0, poll_interval: float = 0.5) -> Sandbox:
        """Polls until RUNNING; SandboxNotRunningError if it ends, TimeoutError when `timeout` runs out."""
        self.bulk_wait_for_creation([sandbox_id], timeout=timeout, poll_interval=poll_interval)
        return self.get(sandbox_id)

    def bulk_wait_for_creation(
        self, sandbox_ids: Sequence[str], timeout: float = 300.0, poll_interval: float = 0.5
    ) -> Dict[str, SandboxStatus]:
        """Waits until every sandbox is RUNNING, polling their statuses in batches."""
        deadline = time.monotonic() + timeout
        waiting = list(dict.fromkeys(sandbox_ids))
        done: Dict[str, SandboxStatus] = {}
        last: Optional[str] = None
        while True:
            statuses = self.get_sandbox_statuses(waiting)
            if statuses.not_found:
                self.get(statuses.not_found[0])  # raises SandboxNotFoundError
            for sid, e in statuses.statuses.items():
                if c.running(sid, e.status, e.error_reason):
                    done[sid] = e.status
                else:
                    last = f"{sid} {e.status.value}"
            waiting = [s for s in waiting if s not in done]
            if not waiting:
                return done
            if time.monotonic() + poll_interval > deadline:
                raise c.wait_timeout(f"{len(waiting)} sandbox(es) not RUNNING", timeout, last)
            time.sleep(poll_interval)

    def get_logs(self, sandbox_id: str, tail_bytes: Optional[int] = None) -> str:
        """The sandbox's console output (the end of it)."""
        result: str = self._run(c.logs(sandbox_id, tail_bytes))
        return result

    # Commands

    def execute_command(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
        user: Optional[str] = None,
        stdin: Optional[str] = None,
    ) -> CommandResponse:
        """Runs a command (a string under /bin/sh -c, a list as argv) and buffers its output.

        CommandTimeoutError when it runs past `timeout` seconds (the server kills it).
        """
        result: CommandResponse = self._run(c.execute(sandbox_id, command, working_dir, env, timeout, user, stdin))
        return result

    def execute_command_stream(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
        user: Optional[str] = None,
    ) -> Iterator[ExecEvent]:
        """Runs a command and yields its events as they come ("started", "stdout", "stderr", "exit").

        Closing the iterator early (``close()`` or leaving the ``for``) kills the command.
        """
        call = c.execute_stream(sandbox_id, command, working_dir, env, timeout, user)
        with self.client.stream(call.method, call.path, **call.kw) as r:
            decoder = call.parse(r.headers.get("content-type"))
            for chunk in r.iter_bytes():
                for event in decoder.push(chunk):
                    yield event
            decoder.finish()

    def start_background_job(
        self, sandbox_id: str, command: Command, working_dir: Optional[str] = None, env: Optional[Dict[str, str]] = None
    ) -> BackgroundJob:
        """Starts a detached command that runs until it ends or the sandbox ends."""
        result: BackgroundJob = self._run(c.start_job(sandbox_id, command, working_dir, env))
        return result

    def get_background_job(self, sandbox_id: str, job: Union[str, BackgroundJob]) -> BackgroundJobStatus:
        result: BackgroundJobStatus = self._run(c.get_job(sandbox_id, job))
        return result

    def run_background_job(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: float = 3600.0,
        poll_interval: float = 1.0,
    ) -> BackgroundJobStatus:
        """Starts a job and polls until it ends (TimeoutError after `timeout`; the job keeps running)."""
        job = self.start_background_job(sandbox_id, command, working_dir, env)
        deadline = time.monotonic() + timeout
        while True:
            status = self.get_background_job(sandbox_id, job)
            if status.completed:
                return status
            if time.monotonic() + poll_interval > deadline:
                raise c.wait_timeout(f"job {job.job_id} not ended", timeout, status.status)
            time.sleep(poll_interval)

    # Files

    def upload_file(self, sandbox_id: str, file_path: str, local_file_path: str) -> FileUploadResponse:
        """Streams a local file to `file_path` in the sandbox (any size; parents are created)."""
        size = os.stat(local_file_path).st_size
        d = self.client.json(
            "PUT", c.files_path(sandbox_id), content=lambda: _file_chunks(local_file_path), **_upload_kw(file_path, size)
        )
        return FileUploadResponse(d["path"], int(d["bytes"]))

    def upload_bytes(
        self, sandbox_id: str, file_path: str, file_bytes: bytes, filename: Optional[str] = None
    ) -> FileUploadResponse:
        """Writes `file_bytes` to `file_path` (`filename` is accepted for prime_sandboxes compatibility)."""
        d = self.client.json("PUT", c.files_path(sandbox_id), content=bytes(file_bytes), **_upload_kw(file_path, len(file_bytes)))
        return FileUploadResponse(d["path"], int(d["bytes"]))

    def download_file(self, sandbox_id: str, file_path: str, local_file_path: str) -> int:
        """Streams a file of the sandbox to `local_file_path` (written whole or not at all); the byte count."""
        partial = f"{local_file_path}.{uuid.uuid4().hex[:8]}.partial"
        written = 0
        try:
            with self.client.stream(
                "GET", c.files_path(sandbox_id), params={"path": file_path}, timeout=None,
                headers={"accept": "application/octet-stream"},
            ) as r, open(partial, "xb") as out:
                for chunk in r.iter_bytes(CHUNK):
                    out.write(chunk)
                    written += len(chunk)
            os.replace(partial, local_file_path)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return written

    def read_file(self, sandbox_id: str, file_path: str, encoding: Optional[str] = "utf-8") -> Any:
        """A file's content: text in `encoding`, or bytes with encoding=None."""
        r = self.client.request(
            "GET", c.files_path(sandbox_id), params={"path": file_path}, headers={"accept": "application/octet-stream"}
        )
        return r.content if encoding is None else r.content.decode(encoding)

    # Network and ports

    def expose(self, sandbox_id: str, port: int, name: Optional[str] = None) -> ExposedPort:
        """Makes `port` reachable through the server (`url`, `tcp_url`, with `token`); `name` is accepted for prime_sandboxes."""
        result: ExposedPort = self._run(c.expose(sandbox_id, port))
        return result

    def unexpose(self, sandbox_id: str, port: int) -> None:
        self._run(c.unexpose(sandbox_id, port))

    def list_exposed_ports(self, sandbox_id: str) -> List[ExposedPort]:
        result: List[ExposedPort] = self._run(c.list_ports(sandbox_id))
        return result

    def get_network(self, sandbox_id: str) -> SandboxNetwork:
        result: SandboxNetwork = self._run(c.get_network(sandbox_id))
        return result

    def set_network(
        self, sandbox_id: str, network_allowlist: Optional[List[str]] = None, network_denylist: Optional[List[str]] = None
    ) -> SandboxNetwork:
        """Replaces the egress policy of a running sandbox (neither list: the server's default)."""
        result: SandboxNetwork = self._run(c.set_network(sandbox_id, network_allowlist, network_denylist))
        return result

    # Checkpoints and forks

    def checkpoint(self, sandbox_id: str, include_memory: bool = False, ttl_seconds: Optional[int] = None) -> Checkpoint:
        """Saves the sandbox's files (and with include_memory its RAM); usually FROZEN at once, DURABLE later."""
        result: Checkpoint = self._run(c.checkpoint(sandbox_id, include_memory, ttl_seconds))
        return result

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        result: Checkpoint = self._run(c.get_checkpoint(checkpoint_id))
        return result

    def list_checkpoints(self, sandbox_id: Optional[str] = None) -> List[Checkpoint]:
        """The team's checkpoints, or those of one sandbox."""
        result: List[Checkpoint] = self._run(c.list_checkpoints(sandbox_id))
        return result

    def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        result: Checkpoint = self._run(c.delete_checkpoint(checkpoint_id))
        return result

    def wait_for_checkpoint(self, checkpoint_id: str, timeout: float = 300.0, poll_interval: float = 0.2) -> Checkpoint:
        """Polls until DURABLE; RuntimeError (CheckpointFailedError) on FAILED, TimeoutError when time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            cp = self.get_checkpoint(checkpoint_id)
            if c.checkpoint_done(cp):
                return cp
            if time.monotonic() + poll_interval > deadline:
                raise c.wait_timeout(f"checkpoint {checkpoint_id} not DURABLE", timeout, cp.state.value)
            time.sleep(poll_interval)

    def fork(
        self,
        sandbox_id: str,
        name: Optional[str] = None,
        cpu_cores: Optional[int] = None,
        memory_gb: Optional[float] = None,
        timeout_minutes: Optional[float] = None,
        memory: bool = False,
        wait_timeout_seconds: Optional[float] = None,
    ) -> Sandbox:
        """Checkpoints the sandbox and starts a child with its files (and with memory=True its processes)."""
        call = c.fork(sandbox_id, name, cpu_cores, memory_gb, timeout_minutes, memory, wait_timeout_seconds)
        result: Sandbox = self._run(call)
        return result

    def pause(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = self._run(c.pause(sandbox_id))
        return result

    def resume(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = self._run(c.resume(sandbox_id))
        return result

    def reset(self, sandbox_id: str, checkpoint_id: str) -> Sandbox:
        """Puts a running sandbox back to a memory checkpoint's state, keeping its id."""
        result: Sandbox = self._run(c.reset(sandbox_id, checkpoint_id))
        return result

    # Desktop sessions (sandboxes created with display=..., image sandtree/desktop; docs/desktop.md)

    def desktop_info(self, sandbox_id: str) -> Dict[str, Any]:
        """The display's size and state; ConflictError (NO_DISPLAY) without one."""
        result: Dict[str, Any] = self._run(dc.info(sandbox_id))
        return result

    def desktop_act(self, sandbox_id: str, action: Dict[str, Any]) -> Dict[str, Any]:
        """Performs one action, e.g. {"type": "click", "x": 10, "y": 20}, and returns its event."""
        result: Dict[str, Any] = self._run(dc.act(sandbox_id, action))
        return result

    def desktop_screenshot(self, sandbox_id: str) -> bytes:
        """Takes a screenshot (recorded in the log) and returns the PNG."""
        r = self.client.request("POST", f"{dc.desktop_path(sandbox_id)}/actions", json={"type": "screenshot"}, **dc.screenshot_kw())
        return r.content

    def desktop_screenshot_file(self, sandbox_id: str, sha256: str) -> bytes:
        """A screenshot of the log, by the sha256 its events name."""
        return self.client.request("GET", dc.screenshot_path(sandbox_id, sha256)).content

    def desktop_events(self, sandbox_id: str, after_seq: int = 0) -> List[Dict[str, Any]]:
        """The session's event log (events with seq greater than after_seq)."""
        r = self.client.request("GET", f"{dc.desktop_path(sandbox_id)}/events", **dc.events_kw(after_seq))
        return dc.parse_events(r.text)

    def desktop_replay(self, sandbox_id: str, source_sandbox_id: Optional[str] = None, **kw: Any) -> Dict[str, Any]:
        """Replays a log (source_sandbox_id's, or events=[...]) into this sandbox; a report per step."""
        result: Dict[str, Any] = self._run(dc.replay(sandbox_id, source_sandbox_id, **kw))
        return result

    def desktop_vnc(self, sandbox_id: str, writable: bool = False) -> Dict[str, Any]:
        """Starts VNC in the guest (view-only unless writable) and exposes its port (token shown once)."""
        result: Dict[str, Any] = self._run(dc.vnc(sandbox_id, writable))
        return result
