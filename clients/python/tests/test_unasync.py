"""The synchronous client's parts are generated from the async ones (scripts/unasync.py): each
generated file must be what the script writes now, and the two clients must offer the same methods."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from sandtree import AsyncSandboxClient, SandboxClient

PY_ROOT = Path(__file__).resolve().parents[1]


def test_the_generated_sync_parts_are_up_to_date() -> None:
    r = subprocess.run(
        [sys.executable, str(PY_ROOT / "scripts" / "unasync.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr


def test_both_clients_have_the_same_methods_with_the_same_parameters() -> None:
    def methods(cls: type) -> dict:
        skip = {"close", "aclose", "__init__"}
        return {
            n: [p.name for p in inspect.signature(f).parameters.values()]
            for n, f in inspect.getmembers(cls, callable)
            if not n.startswith("_") and n not in skip
        }

    sync, asyn = methods(SandboxClient), methods(AsyncSandboxClient)
    assert sync == asyn
    for name in asyn:
        fn = getattr(AsyncSandboxClient, name)
        assert inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn), name
        assert not (inspect.iscoroutinefunction(getattr(SandboxClient, name))), name
