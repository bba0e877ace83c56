"""Checkpoints, forks and background jobs through SandboxClient, against a real server."""

from __future__ import annotations

import time

import pytest

from sandtree import CheckpointNotFoundError, CheckpointState, SandboxClient, SandboxNotRunningError, SandboxStatus


def test_checkpoint_then_fork_carries_the_files(client: SandboxClient, sandbox_id: str) -> None:
    client.upload_bytes(sandbox_id, "/root/state.txt", b"before fork\n")
    cp = client.checkpoint(sandbox_id)
    assert cp.sandbox_id == sandbox_id
    durable = client.wait_for_checkpoint(cp.id, timeout=300)
    assert durable.state == CheckpointState.DURABLE
    assert cp.id in [c.id for c in client.list_checkpoints(sandbox_id)]
    assert cp.id in [c.id for c in client.list_checkpoints()]
    assert client.get_checkpoint(cp.id).id == cp.id

    child = client.fork(sandbox_id, name="py-child")
    try:
        assert child.id != sandbox_id
        assert child.source_checkpoint_id is not None
        client.wait_for_creation(child.id, timeout=300)
        assert client.read_file(child.id, "/root/state.txt").content == "before fork\n"
        # The child's writes stay its own.
        client.upload_bytes(child.id, "/root/state.txt", b"child\n")
        assert client.read_file(sandbox_id, "/root/state.txt").content == "before fork\n"
    finally:
        assert client.delete(child.id).status == SandboxStatus.TERMINATED

    client.delete_checkpoint(cp.id)
    with pytest.raises(CheckpointNotFoundError):
        client.get_checkpoint("cp-does-not-exist")


def test_background_job_runs_to_its_exit_code(client: SandboxClient, sandbox_id: str) -> None:
    job = client.start_background_job(sandbox_id, "echo started; sleep 1; echo done >&2; exit 7")
    assert job.sandbox_id == sandbox_id
    deadline = time.monotonic() + 120
    status = client.get_background_job(sandbox_id, job)
    while not status.completed and time.monotonic() < deadline:
        time.sleep(0.5)
        status = client.get_background_job(sandbox_id, job.job_id)
    assert status.completed
    assert (status.exit_code, status.stdout, status.stderr) == (7, "started\n", "done\n")


def test_pause_resume_and_reset_to_a_memory_checkpoint(client: SandboxClient, sandbox_id: str) -> None:
    assert client.pause(sandbox_id).status == SandboxStatus.PAUSED
    with pytest.raises(SandboxNotRunningError) as e:
        client.execute_command(sandbox_id, "true")
    assert e.value.details.get("status") == "PAUSED"
    assert client.resume(sandbox_id).status == SandboxStatus.RUNNING
    assert client.execute_command(sandbox_id, "echo back").stdout == "back\n"

    cp = client.checkpoint(sandbox_id, include_memory=True)
    assert client.wait_for_checkpoint(cp.id, timeout=300).has_memory
    client.execute_command(sandbox_id, "echo later > /tmp/after-checkpoint")
    reset = client.reset(sandbox_id, cp.id)
    assert (reset.id, reset.status) == (sandbox_id, SandboxStatus.RUNNING)
    assert client.execute_command(sandbox_id, "test -e /tmp/after-checkpoint").exit_code == 1
    client.delete_checkpoint(cp.id)
