"""What every part of SandboxClient shares: its HTTP client and how a `Call` is sent."""
# GENERATED from _async_base.py by scripts/unasync.py: edit _async_base.py and run it again.

from __future__ import annotations

from typing import Any

from . import _calls as c
from .api_client import APIClient


class Base:
    client: APIClient
    # prime_sandboxes' bounds on background job output reads; see SandboxClient.__init__.
    background_job_output_concurrency: int = 20

    def _run(self, call: c.Call) -> Any:
        return call.parse(self.client.json(call.method, call.path, **call.kw))
