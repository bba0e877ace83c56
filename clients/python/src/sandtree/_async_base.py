"""What every part of AsyncSandboxClient shares: its HTTP client and how a `Call` is sent."""

from __future__ import annotations

from typing import Any

from . import _calls as c
from .api_client import AsyncAPIClient


class AsyncBase:
    client: AsyncAPIClient
    # prime_sandboxes' bounds on background job output reads; see AsyncSandboxClient.__init__.
    background_job_output_concurrency: int = 20

    async def _run(self, call: c.Call) -> Any:
        return call.parse(await self.client.json(call.method, call.path, **call.kw))
