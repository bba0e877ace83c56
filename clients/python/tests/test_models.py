"""Pure parts without a server: the wire mapping of a create, the error registry, checkpoint states."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandtree import (
    APIError,
    BackgroundJobStatus,
    BudgetExceededError,
    Checkpoint,
    CheckpointFailedError,
    CheckpointState,
    CreateSandboxRequest,
    NotFoundError,
    RateLimitError,
    SandboxFileNotFoundError,
    SandboxImagePullError,
    SandboxNotRunningError,
    SandboxVMError,
    ServerError,
    UnauthorizedError,
    ValidationError,
)
from sandtree import Sandbox, _calls
from sandtree.api_client import _retry_after
from sandtree.errors import _BY_CODE, error_for


def test_create_request_maps_prime_sandboxes_names_onto_the_api() -> None:
    req = CreateSandboxRequest(
        docker_image="sandtree/busybox",
        memory_gb=0.25,
        environment_vars={"A": "1"},
        team_id="ignored",
        idempotency_key="k1",
    )
    assert req.to_wire() == {"image": "sandtree/busybox", "memory_gb": 0.25, "environment_vars": {"A": "1"}, "idempotency_key": "k1"}
    call = _calls.create(CreateSandboxRequest(docker_image="x"))
    assert call.kw["json"]["idempotency_key"].startswith("py-")
    assert call.kw["idempotent"] is True
    assert _calls.create(CreateSandboxRequest(checkpoint_id="cp-1")).kw["json"]["checkpoint_id"] == "cp-1"
    assert CreateSandboxRequest(docker_image="x", nested_virtualization=True).to_wire()["nested_virtualization"] is True
    with pytest.raises(ValueError):
        CreateSandboxRequest().to_wire()


@pytest.mark.parametrize(
    "code,status,cls",
    [
        ("UNAUTHORIZED", 401, UnauthorizedError),
        ("SANDBOX_NOT_RUNNING", 409, SandboxNotRunningError),
        ("FILE_NOT_FOUND", 404, SandboxFileNotFoundError),
        ("REGISTRY_UNREACHABLE", 502, SandboxImagePullError),
        ("RATE_LIMIT_BURST", 429, RateLimitError),
        ("QUOTA_MEMORY", 429, BudgetExceededError),
        ("BUDGET_EXCEEDED", 402, BudgetExceededError),
        ("EXCEEDS_HOST_CAPACITY", 422, ValidationError),
        ("SOMETHING_NEW", 404, NotFoundError),
        ("SOMETHING_NEW", 503, ServerError),
    ],
)
def test_codes_map_to_classes(code: str, status: int, cls: type) -> None:
    err = error_for(code, "m", status=status, request_id="req-1", retry_after=2.0)
    assert type(err) is cls and isinstance(err, APIError)
    assert (err.code, err.status, err.request_id) == (code, status, "req-1")


def test_every_code_of_the_registry_has_a_class() -> None:
    """The server's registry (packages/protocol/src/errors.ts) and this client's table agree."""
    registry = (Path(__file__).resolve().parents[3] / "packages" / "protocol" / "src" / "errors.ts").read_text()
    block = registry[registry.index("export const ERROR_STATUS = {") : registry.index("} as const;")]
    codes = dict((c, int(s)) for c, s in re.findall(r"^\s+([A-Z_]+): (\d{3}),$", block, re.M))
    assert len(codes) > 40
    assert sorted(set(codes) - set(_BY_CODE)) == []
    for code, status in codes.items():
        err = error_for(code, "m", status=status)
        assert err.code == code and isinstance(err, APIError)
        if status >= 500:
            assert isinstance(err, (ServerError, SandboxImagePullError)), code
        if status == 404 and code != "IMAGE_NOT_FOUND":
            assert isinstance(err, NotFoundError), code
    assert type(error_for("VM_UNRESPONSIVE", "m", status=504)) is SandboxVMError


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert _retry_after(None) is None


def test_a_failed_checkpoint_is_a_runtime_error() -> None:
    failed = Checkpoint(id="cp-1", sandbox_id="sb-1", state=CheckpointState.FAILED, error="disk full")
    with pytest.raises(RuntimeError, match="disk full") as e:
        _calls.checkpoint_done(failed)
    assert isinstance(e.value, CheckpointFailedError)
    assert _calls.checkpoint_done(Checkpoint(id="cp-2", sandbox_id="sb-1", state=CheckpointState.DURABLE))
    assert not _calls.checkpoint_done(Checkpoint(id="cp-3", sandbox_id="sb-1", state=CheckpointState.FROZEN))


# A running sandbox as the API answers it, with only the fields every answer has.
_RUNNING = {
    "id": "sb-1",
    "name": None,
    "team_id": "team_1",
    "image": "sandtree/busybox",
    "status": "RUNNING",
    "cpu_cores": 1,
    "memory_gb": 0.25,
    "disk_size_gb": 1,
}


def test_a_sandbox_carries_its_host_for_admin_keys_and_lists_filter_by_host() -> None:
    """`host` is in admin keys' answers only: None when absent; list(host=...) sends ?host=."""
    wire = _RUNNING
    assert Sandbox.from_dict({**wire, "host": "worker-1"}).host == "worker-1"
    assert Sandbox.from_dict(wire).host is None
    call = _calls.list_(None, {"a": "b"}, 10, None, "worker-1")
    assert ("host", "worker-1") in call.kw["params"]
    assert not any(k == "host" for k, _ in _calls.list_(None, None, 10, None).kw["params"])


def test_an_ended_sandbox_says_why_with_a_stable_code() -> None:
    """`error_code` beside `error_reason`: GUEST_RESET and the like; None when absent (older servers)."""
    wire = {
        **_RUNNING,
        "status": "ERROR",
        "error_reason": "qemu exited unexpectedly (exit code 0: the guest reset or powered off)",
    }
    ended = Sandbox.from_dict({**wire, "error_code": "GUEST_RESET"})
    assert ended.error_code == "GUEST_RESET"
    assert ended.error_message == wire["error_reason"]
    assert Sandbox.from_dict(wire).error_code is None


def test_a_job_status_reads_its_tails_and_whether_it_ended() -> None:
    """The wire's `stdout_tail`/`stderr_tail` are `stdout`/`stderr`; `completed` is any status but RUNNING."""
    wire = {"job_id": "j1", "status": "EXITED", "exit_code": 3, "stdout_tail": "out", "stderr_tail": "err"}
    done = BackgroundJobStatus.from_dict(wire)
    assert (done.completed, done.exit_code, done.stdout, done.stderr) == (True, 3, "out", "err")
    running = BackgroundJobStatus.from_dict({"job_id": "j1", "status": "RUNNING", "exit_code": None})
    assert (running.completed, running.stdout, running.stderr) == (False, "", "")
