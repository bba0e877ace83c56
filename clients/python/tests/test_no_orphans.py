"""No orphans under kill -9: a worker SIGKILLed right after its create call leaves nothing running
once the sandbox's hard lifetime (timeout_minutes) has passed, and the same worker restarted finds
and deletes what it owned by its label (the pattern of clients/python/README.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from conftest import Server

from sandtree import SandboxClient, SandboxStatus

WORKER = Path(__file__).with_name("orphan_worker.py")
ACTIVE = {SandboxStatus.PENDING, SandboxStatus.PROVISIONING, SandboxStatus.RUNNING}


def qemu_of(sandbox_id: str) -> List[int]:
    """PIDs of QEMU processes whose argv names the sandbox (its -name and paths carry the id)."""
    pids = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            argv = Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu-system" in argv[0] and any(sandbox_id.encode() in a for a in argv):
            pids.append(int(e))
    return pids


def kill_after_create(server: Server, client: SandboxClient, worker: str, timeout_minutes: float) -> str:
    """Starts the worker, SIGKILLs it as soon as the server holds its sandbox; that sandbox's id."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "--url", server.url, "--key", server.key, "--worker", worker,
         "--timeout-minutes", str(timeout_minutes)],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"creating"
        deadline = time.monotonic() + 120
        while True:
            found = client.list(labels={"worker": worker}).sandboxes
            if found:
                break
            assert time.monotonic() < deadline, "the worker's create never reached the server"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return found[0].id


def wait_ended(client: SandboxClient, sandbox_id: str, timeout: float) -> SandboxStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(sandbox_id).status
        if status not in ACTIVE:
            return status
        assert time.monotonic() < deadline, f"{sandbox_id} still {status.value} after {timeout} s"
        time.sleep(0.5)


def test_a_killed_workers_sandbox_ends_at_its_hard_lifetime(server: Server, client: SandboxClient) -> None:
    sid = kill_after_create(server, client, "w-lifetime", timeout_minutes=0.1)
    assert wait_ended(client, sid, timeout=240) == SandboxStatus.TIMEOUT
    deadline = time.monotonic() + 30
    while qemu_of(sid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert qemu_of(sid) == []
    assert [s for s in client.list(labels={"worker": "w-lifetime"}).sandboxes if s.status in ACTIVE] == []


def test_a_restarted_worker_sweeps_what_it_owned_by_label(server: Server, client: SandboxClient) -> None:
    sid = kill_after_create(server, client, "w-sweep", timeout_minutes=30)
    # Still there: nobody deleted it, and its lifetime is far off.
    assert client.get(sid).status in ACTIVE
    out = subprocess.run(
        [sys.executable, str(WORKER), "--url", server.url, "--key", server.key, "--worker", "w-sweep", "--sweep"],
        check=True, capture_output=True, timeout=120,
    ).stdout
    assert out.strip() == b"swept 1"
    assert wait_ended(client, sid, timeout=120) == SandboxStatus.TERMINATED
    deadline = time.monotonic() + 30
    while qemu_of(sid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert qemu_of(sid) == []
