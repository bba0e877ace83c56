"""Each API call once: its method, path, query, body and how its answer is parsed.

The sync and async clients only differ in how they send a `Call`, so both stay in step.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union
from urllib.parse import quote

from ._exec_stream import EXEC_STREAM_ACCEPT, exec_decoder
from .errors import (
    CheckpointFailedError,
    CommandTimeoutError,
    SandboxNotRunningError,
    SandboxTimeoutError,
    SandboxWaitTimeoutError,
)
from .models import (
    BackgroundJob,
    BackgroundJobStatus,
    BatchSandboxStatusResponse,
    BulkDeleteSandboxResponse,
    Checkpoint,
    CheckpointState,
    CommandResponse,
    CreateSandboxRequest,
    ExposedPort,
    Sandbox,
    SandboxListResponse,
    SandboxNetwork,
    SandboxStatus,
    SandboxStatusLookupError,
    SandboxStatusSnapshot,
)

Command = Union[str, Sequence[str]]
BATCH = 100  # ids per batch-status call (the server's limit)


class Call(NamedTuple):
    method: str
    path: str
    kw: Dict[str, Any]
    parse: Callable[[Any], Any]


def sandbox_path(sandbox_id: str) -> str:
    return f"/v1/sandboxes/{quote(sandbox_id, safe='')}"


def _sandbox(d: Any) -> Sandbox:
    return Sandbox.from_dict(d)


def create(request: CreateSandboxRequest) -> Call:
    body = request.to_wire()
    # A key chosen here and reused by every retry: a retried create never makes two sandboxes.
    body.setdefault("idempotency_key", f"py-{uuid.uuid4()}")
    return Call("POST", "/v1/sandboxes", {"json": body, "idempotent": True}, _sandbox)


def get(sandbox_id: str) -> Call:
    return Call("GET", sandbox_path(sandbox_id), {}, _sandbox)


def list_(
    status: Optional[Union[str, SandboxStatus]],
    labels: Optional[Dict[str, str]],
    per_page: int,
    cursor: Optional[str],
    host: Optional[str] = None,
) -> Call:
    params: List[Any] = [("limit", per_page)]
    if status is not None:
        params.append(("status", SandboxStatus(status).value))
    params += [("label", f"{k}={v}") for k, v in (labels or {}).items()]
    if host is not None:
        params.append(("host", host))
    if cursor:
        params.append(("cursor", cursor))
    return Call(
        "GET",
        "/v1/sandboxes",
        {"params": params},
        lambda d: SandboxListResponse(
            [Sandbox.from_dict(s) for s in d["sandboxes"]], next_cursor=d.get("next_cursor"), has_next=bool(d.get("next_cursor"))
        ),
    )


def delete(sandbox_id: str) -> Call:
    return Call("DELETE", sandbox_path(sandbox_id), {}, _sandbox)


def bulk_delete(sandbox_ids: Optional[List[str]], labels: Optional[Dict[str, str]]) -> Call:
    if (sandbox_ids is None) == (labels is None):
        raise ValueError("give exactly one of sandbox_ids or labels")
    body = {"ids": list(sandbox_ids)} if sandbox_ids is not None else {"labels": labels}
    # Deleting is idempotent on the server: sending it again is safe.
    return Call(
        "POST",
        "/v1/sandboxes/bulk-delete",
        {"json": body, "idempotent": True},
        _bulk_deleted,
    )


def _bulk_deleted(d: Any) -> BulkDeleteSandboxResponse:
    deleted, missing = list(d["deleted"]), list(d["not_found"])
    failed = [{"sandbox_id": i, "error": "SANDBOX_NOT_FOUND"} for i in missing]
    return BulkDeleteSandboxResponse(deleted, failed, f"{len(deleted)} deleted, {len(missing)} not found")


def batch_status(ids: List[str]) -> Call:
    def parse(d: Any) -> BatchSandboxStatusResponse:
        snaps = [
            SandboxStatusSnapshot(
                s["id"],
                SandboxStatus(s["status"]),
                error_type="TIMEOUT" if s["status"] == "TIMEOUT" else None,
                error_message=s.get("error_reason"),
            )
            for s in d["sandboxes"]
        ]
        errors = [SandboxStatusLookupError(i, "SANDBOX_NOT_FOUND", f"sandbox {i} not found") for i in d["not_found"]]
        return BatchSandboxStatusResponse(snaps, errors)

    return Call("POST", "/v1/sandboxes/batch-status", {"json": {"ids": ids}, "idempotent": True}, parse)


def merge_statuses(parts: List[BatchSandboxStatusResponse]) -> BatchSandboxStatusResponse:
    out = BatchSandboxStatusResponse([], [])
    for p in parts:
        out.statuses += p.statuses
        out.errors += p.errors
    return out


def chunks(ids: Sequence[str]) -> List[List[str]]:
    return [list(ids[i : i + BATCH]) for i in range(0, len(ids), BATCH)]


def logs(sandbox_id: str, tail_bytes: Optional[int]) -> Call:
    return Call("GET", f"{sandbox_path(sandbox_id)}/logs", {"params": {"tail_bytes": tail_bytes}}, lambda d: str(d["console"]))


def command_body(command: Command, **fields: Any) -> Dict[str, Any]:
    """An exec's or a job's request body: a string command runs under /bin/sh -c, a list as argv;
    the fields given as None are left out (the server's defaults)."""
    body: Dict[str, Any] = {"command": command if isinstance(command, str) else list(command)}
    body.update((key, value) for key, value in fields.items() if value is not None)
    return body


def execute(
    sandbox_id: str,
    command: Command,
    working_dir: Optional[str],
    env: Optional[Dict[str, str]],
    timeout: Optional[float],
    user: Optional[str],
    stdin: Optional[str],
) -> Call:
    body = command_body(command, cwd=working_dir, env=env, user=user, timeout_seconds=timeout, stdin=stdin)

    def parse(d: Any) -> CommandResponse:
        r = CommandResponse.from_dict(d)
        if r.timed_out:
            raise CommandTimeoutError(
                f"command ran past its timeout of {timeout} s in sandbox {sandbox_id} and was killed "
                "(pass a longer timeout=, or start it with start_background_job)",
                code="COMMAND_TIMEOUT",
                status=200,
                details={"stdout": r.stdout, "stderr": r.stderr, "exit_code": r.exit_code},
            )
        return r

    # The answer only comes when the command ends: no read deadline unless the command has one.
    http_timeout = None if timeout is None else timeout + 30
    return Call("POST", f"{sandbox_path(sandbox_id)}/exec", {"json": body, "timeout": http_timeout}, parse)


def streamed(call: Call) -> Call:
    """The streamed form of an `execute` call: `parse` takes the answer's Content-Type and gives its
    decoder (binary records, or NDJSON from a server that answers with it: see `_exec_stream`)."""
    kw = dict(call.kw, headers={"accept": EXEC_STREAM_ACCEPT}, timeout=None)
    return Call(call.method, call.path, kw, exec_decoder)


def start_job(
    sandbox_id: str, command: Command, working_dir: Optional[str], env: Optional[Dict[str, str]], user: Optional[str]
) -> Call:
    body = command_body(command, cwd=working_dir, env=env, user=user)
    return Call("POST", f"{sandbox_path(sandbox_id)}/jobs", {"json": body}, BackgroundJob.from_dict)


def get_job(sandbox_id: str, job: Union[str, BackgroundJob], timeout: Optional[float] = None) -> Call:
    job_id = job.job_id if isinstance(job, BackgroundJob) else job
    kw: Dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    return Call("GET", f"{sandbox_path(sandbox_id)}/jobs/{quote(job_id, safe='')}", kw, BackgroundJobStatus.from_dict)


def job_timeout(sandbox_id: str, command: Command, timeout: float, last: str) -> CommandTimeoutError:
    return CommandTimeoutError(
        f"command {command!r} did not end within {timeout} s in sandbox {sandbox_id} (still {last}); the job keeps "
        "running: poll it with get_background_job",
        code="COMMAND_TIMEOUT",
        details={"sandbox_id": sandbox_id, "timeout": timeout},
    )


def file_stat(sandbox_id: str, path: str) -> Call:
    return Call("GET", f"{files_path(sandbox_id)}/stat", {"params": {"path": path}}, lambda d: d)


def files_path(sandbox_id: str) -> str:
    return f"{sandbox_path(sandbox_id)}/files"


def checkpoint(sandbox_id: str, include_memory: bool, ttl_seconds: Optional[int]) -> Call:
    body: Dict[str, Any] = {}
    if include_memory:
        body["include_memory"] = True
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    # Saving memory pauses the VM for the save: no short deadline.
    return Call(
        "POST", f"{sandbox_path(sandbox_id)}/checkpoints", {"json": body, "timeout": None}, Checkpoint.from_dict
    )


def get_checkpoint(checkpoint_id: str) -> Call:
    return Call("GET", f"/v1/checkpoints/{quote(checkpoint_id, safe='')}", {}, Checkpoint.from_dict)


def list_checkpoints(sandbox_id: Optional[str]) -> Call:
    path = "/v1/checkpoints" if sandbox_id is None else f"{sandbox_path(sandbox_id)}/checkpoints"
    return Call("GET", path, {}, lambda d: [Checkpoint.from_dict(c) for c in d["checkpoints"]])


def delete_checkpoint(checkpoint_id: str) -> Call:
    return Call("DELETE", f"/v1/checkpoints/{quote(checkpoint_id, safe='')}", {}, Checkpoint.from_dict)


def checkpoint_done(c: Checkpoint) -> bool:
    """True when DURABLE; raises CheckpointFailedError (a RuntimeError) when it never will be."""
    if c.state == CheckpointState.DURABLE:
        return True
    if c.state in (CheckpointState.FAILED, CheckpointState.DELETING):
        raise CheckpointFailedError(
            f"checkpoint {c.id} is {c.state.value}" + (f": {c.error}" if c.error else ""),
            code="CHECKPOINT_FAILED",
            details={"state": c.state.value, "error": c.error},
        )
    return False


def fork(
    sandbox_id: str,
    name: Optional[str],
    cpu_cores: Optional[int],
    memory_gb: Optional[float],
    timeout_minutes: Optional[float],
    memory: bool,
    wait_timeout_seconds: Optional[float],
    volumes: Optional[str] = None,
) -> Call:
    body: Dict[str, Any] = {}
    for key, value in (
        ("name", name),
        ("volumes", volumes),
        ("cpu_cores", cpu_cores),
        ("memory_gb", memory_gb),
        ("timeout_minutes", timeout_minutes),
        ("wait_timeout_seconds", wait_timeout_seconds),
    ):
        if value is not None:
            body[key] = value
    if memory:
        body["memory"] = True
    # The server checkpoints, waits for DURABLE (up to wait_timeout_seconds) and starts the child.
    return Call("POST", f"{sandbox_path(sandbox_id)}/fork", {"json": body, "timeout": None}, _sandbox)


def pause(sandbox_id: str) -> Call:
    return Call("POST", f"{sandbox_path(sandbox_id)}/pause", {"timeout": None}, _sandbox)


def resume(sandbox_id: str) -> Call:
    return Call("POST", f"{sandbox_path(sandbox_id)}/resume", {"timeout": None}, _sandbox)


def reset(sandbox_id: str, checkpoint_id: str) -> Call:
    return Call(
        "POST", f"{sandbox_path(sandbox_id)}/reset", {"json": {"checkpoint_id": checkpoint_id}, "timeout": None}, _sandbox
    )


def running(sandbox_id: str, status: SandboxStatus, error_reason: Optional[str]) -> bool:
    """True when RUNNING; raises when the sandbox ended and never will be."""
    if status == SandboxStatus.RUNNING:
        return True
    if status.is_terminal:
        cls = SandboxTimeoutError if status == SandboxStatus.TIMEOUT else SandboxNotRunningError
        raise cls(
            f"sandbox {sandbox_id} is {status.value}" + (f": {error_reason}" if error_reason else "")
            + f" (see get_logs({sandbox_id!r}))",
            code="SANDBOX_NOT_RUNNING",
            status=409,
            details={"status": status.value, "error_reason": error_reason},
            sandbox_id=sandbox_id,
            error_type="TIMEOUT" if status == SandboxStatus.TIMEOUT else None,
        )
    return False


def wait_timeout(what: str, timeout: float, last: Optional[str], sandbox_id: Optional[str] = None) -> SandboxWaitTimeoutError:
    """A SandboxNotRunningError (as prime_sandboxes raises) that is also a TimeoutError (as sandtree did)."""
    still = f" (still {last})" if last else ""
    return SandboxWaitTimeoutError(
        f"{what} after {timeout} s{still}; wait longer (max_attempts= or timeout=)",
        code="WAIT_TIMEOUT",
        sandbox_id=sandbox_id,
    )


def expose(sandbox_id: str, port: int) -> Call:
    return Call("POST", f"{sandbox_path(sandbox_id)}/ports", {"json": {"port": port}}, ExposedPort.from_dict)


def unexpose(sandbox_id: str, port: int) -> Call:
    return Call("DELETE", f"{sandbox_path(sandbox_id)}/ports/{int(port)}", {}, lambda d: None)


def list_ports(sandbox_id: str) -> Call:
    return Call("GET", f"{sandbox_path(sandbox_id)}/ports", {}, lambda d: [ExposedPort.from_dict(p) for p in d["ports"]])


def get_network(sandbox_id: str) -> Call:
    return Call("GET", f"{sandbox_path(sandbox_id)}/network", {}, SandboxNetwork.from_dict)


def set_network(sandbox_id: str, allowlist: Optional[List[str]], denylist: Optional[List[str]]) -> Call:
    """Both lists None: the server's default policy."""
    body: Dict[str, Any] = {}
    if allowlist is not None:
        body["network_allowlist"] = allowlist
    if denylist is not None:
        body["network_denylist"] = denylist
    # Setting the same policy again ends in the same state: safe to retry.
    return Call("PUT", f"{sandbox_path(sandbox_id)}/network", {"json": body}, SandboxNetwork.from_dict)
