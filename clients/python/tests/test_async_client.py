"""AsyncSandboxClient against the same real server: the same calls, awaited."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from conftest import LABEL, Server, small

from sandtree import AsyncSandboxClient, SandboxNotFoundError, SandboxStatus, UnauthorizedError


@pytest.mark.asyncio
async def test_async_client_runs_commands_and_moves_files(server: Server, sandbox_id: str, tmp_path: Path) -> None:
    async with AsyncSandboxClient(api_key=server.key, base_url=server.url) as client:
        sb = await client.get(sandbox_id)
        assert sb.status == SandboxStatus.RUNNING
        r = await client.execute_command(sandbox_id, "echo async; exit 2")
        assert (r.stdout, r.exit_code) == ("async\n", 2)

        data = os.urandom(1024 * 1024 + 3)
        (tmp_path / "a.bin").write_bytes(data)
        assert (await client.upload_file(sandbox_id, "/tmp/async.bin", str(tmp_path / "a.bin"))).bytes == len(data)
        assert await client.download_file(sandbox_id, "/tmp/async.bin", str(tmp_path / "b.bin")) == len(data)
        assert (tmp_path / "b.bin").read_bytes() == data
        assert (await client.read_file(sandbox_id, "/tmp/async.bin", encoding=None)).content == data

        events = [e async for e in client.execute_command_stream(sandbox_id, "echo streamed")]
        assert [(e.type, e.text) for e in events if e.type == "stdout"] == [("stdout", "streamed\n")]
        assert events[-1].exit_code == 0

        job = await client.run_background_job(sandbox_id, "echo job; exit 4", timeout=120, poll_interval=0.3)
        assert (job.completed, job.exit_code, job.stdout) == (True, 4, "job\n")

        statuses = await client.get_sandbox_statuses([sandbox_id])
        assert statuses.by_id()[sandbox_id].status == SandboxStatus.RUNNING
        assert sandbox_id in [s.id for s in (await client.list(labels=LABEL)).sandboxes]
        with pytest.raises(SandboxNotFoundError):
            await client.get("sb-does-not-exist")


@pytest.mark.asyncio
async def test_async_create_wait_and_delete(server: Server) -> None:
    client = AsyncSandboxClient(api_key=server.key, base_url=server.url)
    try:
        labels = {**LABEL, "case": "async-bulk"}
        made = await asyncio.gather(*(client.create(small(labels=labels)) for _ in range(2)))
        ids = [sb.id for sb in made]
        try:
            assert (await client.bulk_wait_for_creation(ids, timeout=300)) == {i: SandboxStatus.RUNNING for i in ids}
            for i in ids:
                assert (await client.execute_command(i, "uname -s")).stdout == "Linux\n"
        finally:
            assert sorted((await client.bulk_delete(sandbox_ids=ids)).deleted) == sorted(ids)
        assert {s.status for s in (await client.get_sandbox_statuses(ids)).statuses} == {SandboxStatus.TERMINATED}
    finally:
        await client.aclose()
    async with AsyncSandboxClient(api_key="st_wrong", base_url=server.url) as bad:
        with pytest.raises(UnauthorizedError):
            await bad.list()
