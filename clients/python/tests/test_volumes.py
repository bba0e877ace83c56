"""Volumes through the Python client: the calls and the model without a server, then the sync and
async clients against the session's server (no VM: a volume's files need no sandbox)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server

from sandtree import AsyncSandboxClient, ConflictError, NotFoundError, SandboxClient, ValidationError, VolumeInfo, VolumeState
from sandtree import CreateSandboxRequest, Sandbox, SandboxVolume
from sandtree import _calls as sc
from sandtree import _volume_calls as vc
from sandtree.errors import _BY_CODE


def test_calls_and_model_without_a_server() -> None:
    call = vc.create_volume("data", 3, {"app": "rl"})
    assert (call.method, call.path, call.kw) == ("POST", "/v1/volumes", {"json": {"name": "data", "size_gb": 3, "labels": {"app": "rl"}}})
    assert vc.create_volume("d", None, None).kw == {"json": {"name": "d"}}
    assert vc.get_volume("a b/c").path == "/v1/volumes/a%20b%2Fc"
    assert vc.delete_volume_file("v", "/x", True).kw == {"params": {"path": "/x", "recursive": "true"}}
    v = VolumeInfo.from_dict(
        {"id": "vol-0123456789abcdef", "name": "data", "team_id": "t", "status": "READY", "size_gb": 3, "labels": {},
         "used_bytes": 7, "created_at": "2026-12-05T08:00:00.000Z", "updated_at": "2026-12-05T08:00:00.000Z", "mounted_by": ["sb-x"]}
    )
    assert (v.status, v.used_bytes, v.mounted_by, v.created_at is not None) == (VolumeState.READY, 7, ["sb-x"], True)
    assert v.synced_bytes is None
    assert VolumeInfo.from_dict({"id": "v", "name": "d", "status": "READY", "size_gb": 1, "synced_bytes": "12"}).synced_bytes == 12
    assert _BY_CODE["VOLUME_NOT_FOUND"] is NotFoundError
    assert _BY_CODE["VOLUME_IN_USE"] is ConflictError
    assert _BY_CODE["UNSAFE_PATH"] is ValidationError
    # Forks and restores take volumes="snapshot"; a Sandbox lists what it mounts.
    assert sc.fork("sb-1", None, None, None, None, False, None, "snapshot").kw["json"] == {"volumes": "snapshot"}
    assert CreateSandboxRequest(checkpoint_id="ck-1", restore_volumes="snapshot").to_wire()["volumes"] == "snapshot"
    sb = Sandbox.from_dict(
        {"id": "sb-1", "image": "i", "status": "RUNNING", "cpu_cores": 1, "memory_gb": 1, "disk_size_gb": 1, "team_id": "t",
         "volumes": [{"volume_id": "vol-1", "name": "data", "path": "/data", "read_only": True}]}
    )
    assert sb.volumes == [SandboxVolume("vol-1", "data", "/data", True)]


def test_volume_and_its_files_through_the_sync_client(client: SandboxClient) -> None:
    v = client.create_volume("py-vol", size_gb=1, labels={"k": "v"})
    assert (v.name, v.status, v.size_gb, v.labels) == ("py-vol", VolumeState.READY, 1, {"k": "v"})
    try:
        assert v.id in [x.id for x in client.list_volumes()]
        assert client.write_volume_file("py-vol", "/dir/a.txt", "hello") == 5
        assert client.read_volume_file(v.id, "/dir/a.txt") == b"hello"
        assert [e["name"] for e in client.list_volume_files("py-vol", "/dir")] == ["a.txt"]
        client.make_volume_dir("py-vol", "/empty")
        client.delete_volume_file("py-vol", "/empty")
        assert client.get_volume("py-vol").used_bytes == 5
        with pytest.raises(ValidationError):
            client.read_volume_file("py-vol", "../../etc/passwd")
        with pytest.raises(ConflictError):
            client.create_volume("py-vol")
    finally:
        client.delete_volume("py-vol")
    with pytest.raises(NotFoundError):
        client.get_volume("py-vol")


def test_async_client_has_the_same_calls(server: Server) -> None:
    async def run() -> None:
        async with AsyncSandboxClient(api_key=server.key, base_url=server.url) as ac:
            v = await ac.create_volume("py-async")
            await ac.write_volume_file(v.id, "/b.bin", b"\x00\x01")
            assert await ac.read_volume_file("py-async", "/b.bin") == b"\x00\x01"
            await ac.delete_volume(v.id)

    asyncio.run(run())
