"""The methods the other files drive through one client only, through the other one: async
logs, files, jobs, network and ports, checkpoints, fork, pause/resume and reset; sync
bulk_wait_for_creation and run_background_job. Each against the suite's real server."""

from __future__ import annotations

import pytest
from conftest import Server

from sandtree import (
    AsyncSandboxClient,
    CheckpointNotFoundError,
    CheckpointState,
    ConflictError,
    NotFoundError,
    SandboxClient,
    SandboxStatus,
)


def test_sync_bulk_wait_and_run_background_job(client: SandboxClient, sandbox_id: str) -> None:
    assert client.bulk_wait_for_creation([sandbox_id], timeout=60) == {sandbox_id: SandboxStatus.RUNNING}
    status = client.run_background_job(sandbox_id, "echo job-out; exit 3", timeout=120, poll_interval=0.3)
    assert (status.completed, status.exit_code, status.stdout) == (True, 3, "job-out\n")


@pytest.mark.asyncio
async def test_async_client_covers_the_remaining_methods(server: Server, sandbox_id: str) -> None:
    async with AsyncSandboxClient(api_key=server.key, base_url=server.url) as client:
        assert isinstance(await client.get_logs(sandbox_id), str)
        assert (await client.upload_bytes(sandbox_id, "/root/async-state.txt", b"async\n")).bytes == 6
        job = await client.start_background_job(sandbox_id, "echo bg")
        assert (await client.get_background_job(sandbox_id, job)).job_id == job.job_id

        net = await client.get_network(sandbox_id)
        assert (net.sandbox_id, net.enabled) == (sandbox_id, False)  # the suite's server has no sandbox networks
        assert await client.list_exposed_ports(sandbox_id) == []
        with pytest.raises(ConflictError):
            await client.expose(sandbox_id, 8080)
        with pytest.raises(ConflictError):
            await client.set_network(sandbox_id, network_denylist=["example.com"])
        with pytest.raises(NotFoundError):
            await client.unexpose(sandbox_id, 8080)

        cp = await client.checkpoint(sandbox_id)
        assert (await client.wait_for_checkpoint(cp.id, timeout=300)).state == CheckpointState.DURABLE
        assert (await client.get_checkpoint(cp.id)).sandbox_id == sandbox_id
        assert cp.id in [c.id for c in await client.list_checkpoints(sandbox_id)]
        child = await client.fork(sandbox_id, name="py-async-child")
        try:
            await client.wait_for_creation(child.id, timeout=300)
            assert (await client.read_file(child.id, "/root/async-state.txt")).content == "async\n"
        finally:
            assert (await client.delete(child.id)).status == SandboxStatus.TERMINATED
        await client.delete_checkpoint(cp.id)
        with pytest.raises(CheckpointNotFoundError):
            await client.get_checkpoint("cp-does-not-exist")

        assert (await client.pause(sandbox_id)).status == SandboxStatus.PAUSED
        assert (await client.resume(sandbox_id)).status == SandboxStatus.RUNNING
        mem = await client.checkpoint(sandbox_id, include_memory=True)
        await client.wait_for_checkpoint(mem.id, timeout=300)
        await client.execute_command(sandbox_id, "touch /tmp/after-async-checkpoint")
        reset = await client.reset(sandbox_id, mem.id)
        assert (reset.id, reset.status) == (sandbox_id, SandboxStatus.RUNNING)
        assert (await client.execute_command(sandbox_id, "test -e /tmp/after-async-checkpoint")).exit_code == 1
        await client.delete_checkpoint(mem.id)
