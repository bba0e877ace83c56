"""Code written for prime_sandboxes 0.5.1, ported by its import line, against the suite's real server:
the parameters and answers that differed from sandtree's own (timeout_seconds, max_attempts, page and
list labels, offsets and tails, allow/deny, the batch and snapshot models, RuntimeError timeouts),
and the arguments of Prime's platform that sandtree refuses rather than drop.
(tests/prime_compat.py compares the signatures themselves with the installed prime_sandboxes.)"""

from __future__ import annotations

import pytest
from conftest import LABEL, Server, small

from sandtree import (
    APIClient,
    AsyncAPIClient,
    AsyncSandboxClient,
    BackgroundJobStatusSnapshot,
    CheckpointState,
    CommandTimeoutError,
    CreateSandboxRequest,
    SandboxClient,
    SandboxStatus,
)

LABEL_LIST = [f"{k}={v}" for k, v in LABEL.items()]


def test_waits_take_prime_sandboxes_budgets(client: SandboxClient, sandbox_id: str) -> None:
    assert client.wait_for_creation(sandbox_id, max_attempts=180).status == SandboxStatus.RUNNING
    assert client.wait_for_creation(sandbox_id, 10, 3).id == sandbox_id  # two more agent round trips
    assert client.bulk_wait_for_creation([sandbox_id], max_attempts=30) == {sandbox_id: "RUNNING"}
    for bad in ({"max_attempts": 0}, {"stability_checks": 0}, {"image_build_timeout_seconds": -1}):
        with pytest.raises(ValueError):
            client.wait_for_creation(sandbox_id, **bad)  # type: ignore[arg-type]
    cp = client.checkpoint(sandbox_id)
    durable = client.wait_for_checkpoint(cp.id, timeout_seconds=300)
    assert durable.state == "DURABLE" and durable.docker_image == durable.image
    assert client.list_checkpoints(sandbox_id, checkpoint_id=cp.id) == [durable]
    batch = client.get_checkpoints([cp.id, "ck-nope"])
    assert [c.id for c in batch.checkpoints] == [cp.id]
    assert [(e.checkpoint_id, e.code) for e in batch.errors] == [("ck-nope", "CHECKPOINT_NOT_FOUND")]
    with pytest.raises(ValueError):
        client.wait_for_checkpoint(cp.id, timeout_seconds=0)


def test_list_pages_and_label_lists(client: SandboxClient, sandbox_id: str) -> None:
    page = client.list(labels=LABEL_LIST, per_page=1)
    assert (page.page, page.per_page, len(page.sandboxes)) == (1, 1, 1)
    assert page.total is not None and page.has_next == (page.total > 1)
    everything = client.list(labels=LABEL_LIST, per_page=1000)
    assert sandbox_id in [s.id for s in everything.sandboxes] and everything.total == len(everything.sandboxes)
    beyond = client.list(labels=LABEL_LIST, page=everything.total + 1, per_page=1)
    assert (beyond.sandboxes, beyond.has_next) == ([], False)
    active = client.list(labels=LABEL_LIST, exclude_terminated=True, per_page=1000).sandboxes
    assert sandbox_id in [s.id for s in active] and not [s for s in active if s.status.is_terminal]
    team = client.get(sandbox_id).team_id
    assert sandbox_id in [s.id for s in client.list(team_id=team, per_page=1000).sandboxes]
    assert client.list(team_id="team-of-someone-else").total == 0
    with pytest.raises(ValueError, match="user_id"):
        client.list(user_id="u-1")
    statuses = client.get_sandbox_statuses([sandbox_id, "sb-missing"])
    assert [(s.sandbox_id, s.status) for s in statuses.statuses] == [(sandbox_id, "RUNNING")]
    assert [(e.sandbox_id, e.code) for e in statuses.errors] == [("sb-missing", "SANDBOX_NOT_FOUND")]
    none = client.bulk_delete(labels=["case=nothing-carries-this"])
    assert (none.succeeded, none.failed) == ([], [])
    missing = client.bulk_delete(sandbox_ids=["sb-nope"])
    assert missing.failed == [{"sandbox_id": "sb-nope", "error": "SANDBOX_NOT_FOUND"}]
    assert client.bulk_delete(sandbox_ids=[sandbox_id], team_id="team-of-someone-else").succeeded == []
    assert client.get(sandbox_id).status == SandboxStatus.RUNNING


def test_files_with_offsets_tails_and_prime_answers(client: SandboxClient, sandbox_id: str) -> None:
    up = client.upload_bytes(sandbox_id, "/tmp/prime/digits.txt", b"0123456789", "digits.txt")
    assert (up.success, up.path, up.size) == (True, "/tmp/prime/digits.txt", 10) and up.timestamp is not None
    whole = client.read_file(sandbox_id, "/tmp/prime/digits.txt")
    assert (whole.content, whole.size, whole.total_size, whole.offset, whole.truncated) == ("0123456789", 10, 10, 0, False)
    window = client.read_file(sandbox_id, "/tmp/prime/digits.txt", offset=2, length=3)
    assert (window.content, window.size, window.total_size, window.offset, window.truncated) == ("234", 3, 10, 2, True)
    tail = client.read_file(sandbox_id, "/tmp/prime/digits.txt", 30, -4)
    assert (tail.content, tail.offset, tail.truncated) == ("6789", 6, False)
    assert client.read_file(sandbox_id, "/tmp/prime/digits.txt", offset=-4, encoding=None).content == b"6789"


def test_commands_jobs_and_timeouts(client: SandboxClient, sandbox_id: str) -> None:
    with pytest.raises(CommandTimeoutError) as e:
        client.execute_command(sandbox_id, "sleep 5", None, None, 1)
    assert isinstance(e.value, RuntimeError)
    job = client.start_background_job(sandbox_id, "echo out; exit 2", "/tmp", {"A": "1"}, "root")
    done = client.run_background_job(sandbox_id, "echo ran", 120, "/", None, 0.3)
    assert (done.completed, done.exit_code, done.stdout, done.stdout_error) == (True, 0, "ran\n", None)
    snap = client.get_background_job_status(sandbox_id, job, timeout=30)
    assert isinstance(snap, BackgroundJobStatusSnapshot) and (snap.sandbox_id, snap.job_id) == (sandbox_id, job.job_id)
    assert [s.job_id for s in client.get_background_job_statuses([job, job])] == [job.job_id, job.job_id]
    assert client.get_background_jobs([job])[0].stdout == "out\n"
    with pytest.raises(CommandTimeoutError):
        client.run_background_job(sandbox_id, "sleep 30", timeout=1, poll_interval=0.2)


@pytest.mark.parametrize(
    "field",
    [{"gpu_count": 1}, {"gpu_type": "H100"}, {"region": "eu"}, {"arch": "arm64"}, {"lan_network_id": "n"}, {"cpu_cores": 1.5}],
)
def test_prime_platform_arguments_are_refused_not_dropped(client: SandboxClient, field: dict) -> None:
    with pytest.raises(ValueError, match="not supported by sandtree"):
        client.create(small(**field))


def test_clients_constructed_as_prime_sandboxes_does(server: Server, sandbox_id: str) -> None:
    api = APIClient(server.key, base_url=server.url)
    assert api.get(f"/v1/sandboxes/{sandbox_id}")["id"] == sandbox_id
    assert api.request("POST", "/v1/sandboxes/batch-status", json={"ids": [sandbox_id]}, idempotent_post=True)["sandboxes"]
    client = SandboxClient(api, background_job_output_concurrency=4)
    assert client.get(sandbox_id).vm is True
    with pytest.raises(ValueError):
        SandboxClient(api, background_job_output_queue_size=0)
    with pytest.raises(ValueError, match="not both"):
        SandboxClient(api, api_key=server.key)
    api.close()
    assert CreateSandboxRequest(docker_image="x", labels=["a=1", "b"]).to_wire()["labels"] == {"a": "1", "b": ""}


@pytest.mark.asyncio
async def test_async_client_takes_the_same_arguments(server: Server, sandbox_id: str) -> None:
    async with AsyncSandboxClient(server.key, 16, 4, base_url=server.url) as client:
        assert (await client.wait_for_creation(sandbox_id, max_attempts=180)).status == SandboxStatus.RUNNING
        await client.upload_bytes(sandbox_id, "/tmp/prime/async.txt", b"abcdef", "async.txt")
        tail = await client.read_file(sandbox_id, "/tmp/prime/async.txt", offset=-2)
        assert (tail.content, tail.offset, tail.total_size) == ("ef", 4, 6)
        cp = await client.checkpoint(sandbox_id)
        assert (await client.wait_for_checkpoint(cp.id, timeout_seconds=300)).state == CheckpointState.DURABLE
        page = await client.list(labels=LABEL_LIST, per_page=1)
        assert page.total is not None and page.total >= 1
        job = await client.start_background_job(sandbox_id, "echo a")
        status = (await client.get_background_jobs([job]))[0]
        assert status.job_id == job.job_id
        with pytest.raises(CommandTimeoutError):
            await client.run_background_job(sandbox_id, "sleep 30", timeout=1, poll_interval=0.2)


@pytest.mark.asyncio
async def test_async_client_still_takes_an_api_client_first(server: Server, sandbox_id: str) -> None:
    api = AsyncAPIClient(server.key, base_url=server.url)
    async with AsyncSandboxClient(api) as client:
        assert (await client.get(sandbox_id)).id == sandbox_id
    await api.aclose()
