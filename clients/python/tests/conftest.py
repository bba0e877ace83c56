"""A real sandtree server for the whole session (`node packages/cli/dist/main.js serve --port 0`),
and one busybox sandbox shared by the tests that only need a running VM (VMs are slow under TCG)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

PY_ROOT = Path(__file__).resolve().parents[1]
REPO = PY_ROOT.parents[1]
sys.path.insert(0, str(PY_ROOT / "src"))

from sandtree import CreateSandboxRequest, SandboxClient  # noqa: E402
from sandtree._config import parse_credentials  # noqa: E402

IMAGE = "sandtree/busybox"
LABEL = {"suite": "python-sdk"}


@dataclass
class Server:
    url: str
    key: str
    data_dir: Path
    log: Path


def small(**kw: object) -> CreateSandboxRequest:
    """The smallest sandbox the tests need: busybox, 0.25 GiB, a lifetime cap in case cleanup fails."""
    args: dict = {"docker_image": IMAGE, "memory_gb": 0.25, "timeout_minutes": 30, "labels": dict(LABEL)}
    args.update(kw)
    return CreateSandboxRequest(**args)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    main = REPO / "packages" / "cli" / "dist" / "main.js"
    assert main.exists(), f"{main} is missing: run `npm run build` first"
    data_dir = Path(tempfile.mkdtemp(prefix="sandtree-py-"))
    log = data_dir.parent / f"{data_dir.name}.log"
    env = dict(os.environ, SANDTREE_NETWORK="off")
    for k in ("SANDTREE_API_URL", "SANDTREE_API_KEY", "SANDTREE_PORT", "SANDTREE_DATA_DIR"):
        env.pop(k, None)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["node", str(main), "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--port", "0"],
            cwd=str(REPO),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        creds_file = data_dir / "credentials.env"
        deadline = time.monotonic() + 180
        creds: dict = {}
        # The server writes credentials.env (with the port it got) once it listens.
        while "SANDTREE_API_KEY" not in creds:
            if proc.poll() is not None:
                raise RuntimeError(f"sandtree serve exited {proc.returncode}:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"sandtree serve did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.2)
            if creds_file.exists():
                creds = parse_credentials(creds_file.read_text())
        yield Server(creds["SANDTREE_API_URL"], creds["SANDTREE_API_KEY"], data_dir, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[SandboxClient]:
    with SandboxClient(api_key=server.key, base_url=server.url) as c:
        try:
            yield c
        finally:
            # Whatever a failed test left behind (the tests' sandboxes all carry LABEL).
            c.bulk_delete(labels=LABEL)


@pytest.fixture(scope="session")
def sandbox_id(client: SandboxClient) -> Iterator[str]:
    """One RUNNING busybox sandbox for the session; deleted at its end."""
    sb = client.create(small(name="py-shared"))
    try:
        client.wait_for_creation(sb.id, timeout=300)
        yield sb.id
    finally:
        client.delete(sb.id)
