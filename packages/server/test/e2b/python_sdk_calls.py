"""The core calls of the Python `e2b` SDK, sync and async, against E2B_API_URL / E2B_SANDBOX_URL.

Prints one JSON object of what each API answered; the calling test asserts on it.
"""

import asyncio
import json
import sys

from e2b import AsyncSandbox, Sandbox, SandboxNotFoundException

TEMPLATE = sys.argv[1]


def sync_calls():
    sbx = Sandbox.create(TEMPLATE, metadata={"sdk": "python-sync"})
    try:
        r = sbx.commands.run("echo sync-out; echo sync-err >&2")
        sbx.files.write("/tmp/py/sync.txt", "written by the sync SDK")
        return {
            "id": sbx.sandbox_id,
            "stdout": r.stdout,
            "stderr": r.stderr,
            "exit_code": r.exit_code,
            "read": sbx.files.read("/tmp/py/sync.txt"),
            "list": sorted(e.name for e in sbx.files.list("/tmp/py")),
            "running": sbx.is_running(),
        }
    finally:
        sbx.kill()


async def async_calls():
    sbx = await AsyncSandbox.create(TEMPLATE, metadata={"sdk": "python-async"})
    try:
        r = await sbx.commands.run("echo async-out; exit 0")
        await sbx.files.write("/tmp/py/async.txt", "written by the async SDK")
        return {
            "id": sbx.sandbox_id,
            "stdout": r.stdout,
            "exit_code": r.exit_code,
            "read": await sbx.files.read("/tmp/py/async.txt"),
            "list": sorted(e.name for e in await sbx.files.list("/tmp/py")),
        }
    finally:
        await sbx.kill()


out = {"sync": sync_calls(), "async": asyncio.run(async_calls())}
try:
    Sandbox.get_info(out["sync"]["id"])
    out["after_kill"] = "still there"
except SandboxNotFoundException as e:
    out["after_kill"] = type(e).__name__
print(json.dumps(out, default=str))
