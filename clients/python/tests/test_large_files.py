"""A 200 MiB file through both clients, streamed both ways (upload_file, download_file), against
the real server: the bytes that come back are the bytes that went, and the guest agrees."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterator

import pytest
from conftest import Server, small

from sandtree import AsyncSandboxClient, SandboxClient

SIZE = 200 * 1024 * 1024


def random_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(SIZE // (4 << 20)):
            chunk = os.urandom(4 << 20)
            h.update(chunk)
            f.write(chunk)
    return h.hexdigest()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def big_box(client: SandboxClient) -> Iterator[str]:
    """A sandbox with room on its disk for the file (/root is on the disk, /tmp is in memory)."""
    sb = client.create(small(name="py-large", disk_size_gb=1))
    try:
        client.wait_for_creation(sb.id, timeout=300)
        yield sb.id
    finally:
        client.delete(sb.id)


def test_sync_client_round_trips_200_mib(client: SandboxClient, big_box: str, tmp_path: Path) -> None:
    digest = random_file(tmp_path / "up.bin")
    assert client.upload_file(big_box, "/root/big.bin", str(tmp_path / "up.bin")).bytes == SIZE
    (tmp_path / "up.bin").unlink()
    assert client.execute_command(big_box, "sha256sum /root/big.bin", timeout=600).stdout.split()[0] == digest
    assert client.download_file(big_box, "/root/big.bin", str(tmp_path / "down.bin")) == SIZE
    assert sha256(tmp_path / "down.bin") == digest
    client.execute_command(big_box, "rm /root/big.bin")


@pytest.mark.asyncio
async def test_async_client_round_trips_200_mib(server: Server, big_box: str, tmp_path: Path) -> None:
    digest = random_file(tmp_path / "up.bin")
    async with AsyncSandboxClient(api_key=server.key, base_url=server.url) as client:
        assert (await client.upload_file(big_box, "/root/big-async.bin", str(tmp_path / "up.bin"))).bytes == SIZE
        (tmp_path / "up.bin").unlink()
        r = await client.execute_command(big_box, "sha256sum /root/big-async.bin", timeout=600)
        assert r.stdout.split()[0] == digest
        assert await client.download_file(big_box, "/root/big-async.bin", str(tmp_path / "down.bin")) == SIZE
        assert sha256(tmp_path / "down.bin") == digest
        await client.execute_command(big_box, "rm /root/big-async.bin")
