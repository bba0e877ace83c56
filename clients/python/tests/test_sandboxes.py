"""SandboxClient against a real server: lifecycle, commands, files, errors."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import pytest
from conftest import LABEL, Server, small

import sandtree
from sandtree import (
    APIError,
    CommandTimeoutError,
    ConflictError,
    NotFoundError,
    SandboxClient,
    SandboxFileNotFoundError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxStatus,
    SandboxTimeoutError,
    UnauthorizedError,
    ValidationError,
)


def test_execute_command_gives_exit_code_stdout_and_stderr(client: SandboxClient, sandbox_id: str) -> None:
    r = client.execute_command(sandbox_id, "echo out; echo err >&2; exit 3")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)

    r = client.execute_command(sandbox_id, ["sh", "-c", 'echo "$A in $(pwd)"'], working_dir="/tmp", env={"A": "b"})
    assert r.stdout == "b in /tmp\n"
    assert r.exit_code == 0


def test_a_command_past_its_timeout_raises_command_timeout(client: SandboxClient, sandbox_id: str) -> None:
    with pytest.raises(CommandTimeoutError) as e:
        client.execute_command(sandbox_id, "sleep 30", timeout=1)
    assert e.value.details["exit_code"] == 124


def test_get_list_statuses_and_logs_of_a_running_sandbox(client: SandboxClient, sandbox_id: str) -> None:
    sb = client.get(sandbox_id)
    assert sb.status == SandboxStatus.RUNNING
    assert sb.docker_image == "sandtree/busybox"
    assert sb.memory_gb == 0.25
    assert sb.labels == LABEL
    assert sb.created_at is not None

    page = client.list(status="RUNNING", labels=LABEL)
    assert sandbox_id in [s.id for s in page.sandboxes]
    assert client.list(labels={"suite": "nobody"}).sandboxes == []

    statuses = client.get_sandbox_statuses([sandbox_id, "sb-missing"])
    assert statuses.by_id()[sandbox_id].status == SandboxStatus.RUNNING
    assert statuses.not_found == ["sb-missing"]
    assert isinstance(client.get_logs(sandbox_id), str)


def test_upload_and_download_round_trip(client: SandboxClient, sandbox_id: str, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    up = client.upload_file(sandbox_id, "/tmp/py/blob.bin", str(src))
    assert up.bytes == len(data)
    dst = tmp_path / "dst.bin"
    assert client.download_file(sandbox_id, "/tmp/py/blob.bin", str(dst)) == len(data)
    assert dst.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []

    client.upload_bytes(sandbox_id, "/tmp/py/hello.txt", "héllo\n".encode(), "hello.txt")
    assert client.read_file(sandbox_id, "/tmp/py/hello.txt").content == "héllo\n"
    assert client.execute_command(sandbox_id, "cat /tmp/py/hello.txt").stdout == "héllo\n"


def test_errors_are_mapped_from_the_server_code(client: SandboxClient, sandbox_id: str, server: Server) -> None:
    with pytest.raises(SandboxNotFoundError) as nf:
        client.get("sb-does-not-exist")
    assert isinstance(nf.value, NotFoundError)
    assert (nf.value.code, nf.value.status) == ("SANDBOX_NOT_FOUND", 404)
    assert nf.value.request_id

    with pytest.raises(SandboxFileNotFoundError) as fe:
        client.read_file(sandbox_id, "/no/such/file")
    assert fe.value.details.get("path") == "/no/such/file"

    with pytest.raises(ValidationError) as ve:
        client.create(small(memory_gb=0.01))
    assert ve.value.code == "VALIDATION_FAILED"

    with SandboxClient(api_key="st_wrong", base_url=server.url) as bad:
        with pytest.raises(UnauthorizedError) as ue:
            bad.list()
    assert isinstance(ue.value, APIError)
    assert ue.value.status == 401


def test_create_wait_delete_and_exec_on_a_deleted_sandbox(client: SandboxClient) -> None:
    sb = client.create(small(name="py-lifecycle", environment_vars={"GREETING": "hi"}))
    assert sb.status in (SandboxStatus.PENDING, SandboxStatus.PROVISIONING)
    try:
        running = client.wait_for_creation(sb.id, timeout=300)
        assert running.status == SandboxStatus.RUNNING
        assert client.execute_command(sb.id, "echo $GREETING").stdout == "hi\n"
    finally:
        gone = client.delete(sb.id)
    assert gone.status == SandboxStatus.TERMINATED
    assert client.delete(sb.id).status == SandboxStatus.TERMINATED  # idempotent
    with pytest.raises(SandboxNotRunningError) as e:
        client.execute_command(sb.id, "true")
    assert e.value.code == "SANDBOX_NOT_RUNNING"
    with pytest.raises(SandboxNotRunningError):
        client.wait_for_creation(sb.id, timeout=5)


def test_a_retried_create_with_the_same_idempotency_key_makes_one_sandbox(client: SandboxClient) -> None:
    labels = {**LABEL, "case": "idempotency"}
    first = client.create(small(idempotency_key="py-idem-1", labels=labels))
    again = client.create(small(idempotency_key="py-idem-1", labels=labels))
    assert again.id == first.id
    assert [s.id for s in client.list(labels=labels).sandboxes] == [first.id]
    result = client.bulk_delete(labels=labels)
    assert result.deleted == [first.id]
    assert client.bulk_delete(sandbox_ids=[first.id, "sb-nope"]).not_found == ["sb-nope"]


def test_config_from_the_servers_credentials_file(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SANDTREE_API_URL", raising=False)
    monkeypatch.delenv("SANDTREE_API_KEY", raising=False)
    monkeypatch.setenv("SANDTREE_DATA_DIR", str(server.data_dir))
    with SandboxClient() as c:
        assert (c.client.base_url, c.client.api_key) == (server.url, server.key)
        assert c.client.user_agent == f"sandtree-python/{sandtree.__version__} python/{platform.python_version()}"
        c.list()
    # The environment wins over the file, and an argument over both.
    monkeypatch.setenv("SANDTREE_API_KEY", "st_from_env")
    with SandboxClient() as c:
        assert c.client.api_key == "st_from_env"
        with pytest.raises(UnauthorizedError):
            c.list()
    with SandboxClient(api_key=server.key) as c:
        c.list()
    monkeypatch.setenv("SANDTREE_DATA_DIR", str(server.data_dir / "none"))
    monkeypatch.delenv("SANDTREE_API_KEY")
    with pytest.raises(ValueError, match="no API key"):
        SandboxClient()


def test_network_and_ports_on_a_server_without_sandbox_networks(client: SandboxClient, sandbox_id: str) -> None:
    # The suite's server runs with SANDTREE_NETWORK=off: sandboxes have no interface to expose.
    net = client.get_network(sandbox_id)
    assert net.sandbox_id == sandbox_id
    assert net.enabled is False
    assert client.list_exposed_ports(sandbox_id) == []
    with pytest.raises(ConflictError) as e:
        client.expose(sandbox_id, 8080)
    assert e.value.code.startswith("NETWORK_")
    with pytest.raises(ConflictError):
        client.set_network(sandbox_id, network_allowlist=["example.com"])
    with pytest.raises(NotFoundError) as nf:
        client.unexpose(sandbox_id, 8080)
    assert nf.value.code == "PORT_NOT_FOUND"


def test_a_streamed_command_yields_its_output_as_events(client: SandboxClient, sandbox_id: str) -> None:
    events = list(client.execute_command_stream(sandbox_id, "echo a; echo b >&2; exit 5"))
    assert events[0].type == "started" and events[0].exec_id
    assert b"".join(e.data for e in events if e.type == "stdout") == b"a\n"
    assert b"".join(e.data for e in events if e.type == "stderr") == b"b\n"
    assert (events[-1].type, events[-1].exit_code) == ("exit", 5)

    # Leaving the stream early kills the command. (It writes on: the server notices the closed
    # connection at the command's next event; a silent command lives on until it writes or exits.)
    stream = client.execute_command_stream(sandbox_id, ["sh", "-c", "while true; do echo tick-4242; sleep 0.2; done"])
    for e in stream:
        if e.type == "stdout":
            break
    assert "tick-4242" in client.execute_command(sandbox_id, "ps -o args").stdout
    stream.close()
    deadline = time.monotonic() + 60
    while "tick-4242" in client.execute_command(sandbox_id, "ps -o args").stdout:
        assert time.monotonic() < deadline, "the command outlived its stream"
        time.sleep(0.5)


def test_a_sandbox_past_its_lifetime_is_a_sandbox_timeout_error(client: SandboxClient) -> None:
    sb = client.create(small(timeout_minutes=0.05))  # 3 s
    try:
        deadline = time.monotonic() + 120
        while client.get(sb.id).status != SandboxStatus.TIMEOUT:
            assert time.monotonic() < deadline, "the sandbox outlived its lifetime"
            time.sleep(0.5)
        with pytest.raises(SandboxTimeoutError) as e:
            client.wait_for_creation(sb.id, timeout=10)
        assert isinstance(e.value, SandboxNotRunningError)
        assert e.value.details["status"] == "TIMEOUT"
    finally:
        client.delete(sb.id)
