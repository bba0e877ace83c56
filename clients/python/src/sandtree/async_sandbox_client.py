"""AsyncSandboxClient: sandboxes of a sandtree server, with prime_sandboxes' methods, awaited.

Its methods live in the _async_*.py parts; sandbox_client.py's SandboxClient is built from their
generated synchronous twins (scripts/unasync.py), so each method is written once.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._async_checkpoints import AsyncCheckpoints
from ._async_commands import AsyncCommands
from ._async_desktop import AsyncDesktop
from ._async_files import AsyncFiles
from ._async_sandboxes import AsyncSandboxes
from ._async_volumes import AsyncVolumes
from ._client_options import OUTPUT_CACHE_BYTES, OUTPUT_CONCURRENCY, OUTPUT_QUEUE_SIZE, api_kw, check_output_limits
from .api_client import AsyncAPIClient


class AsyncSandboxClient(AsyncSandboxes, AsyncCommands, AsyncFiles, AsyncCheckpoints, AsyncDesktop, AsyncVolumes):
    """``async with AsyncSandboxClient() as client``: the server from SANDTREE_API_URL / SANDTREE_API_KEY,
    then the local server's credentials.env; or ``AsyncSandboxClient(api_key=..., base_url=...)``, or
    ``AsyncSandboxClient(api_client=AsyncAPIClient(...))``.

    prime_sandboxes' `max_connections` and `max_keepalive_connections` bound the HTTP connection pool.
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        max_connections: int = 1000,
        max_keepalive_connections: int = 200,
        *,
        background_job_output_concurrency: int = OUTPUT_CONCURRENCY,
        background_job_output_queue_size: int = OUTPUT_QUEUE_SIZE,
        background_job_output_cache_bytes: int = OUTPUT_CACHE_BYTES,
        api_client: Optional[AsyncAPIClient] = None,
        **kw: Any,
    ) -> None:
        check_output_limits(background_job_output_concurrency, background_job_output_queue_size, background_job_output_cache_bytes)
        self.background_job_output_concurrency = background_job_output_concurrency
        if isinstance(api_key, AsyncAPIClient) and api_client is None:
            # sandtree's earlier form, AsyncSandboxClient(AsyncAPIClient(...)), where api_key now stands.
            api_client, api_key = api_key, None
        if api_client is not None:
            custom: Dict[str, Any] = {"api_key": api_key} if api_key is not None else {}
            if (max_connections, max_keepalive_connections) != (1000, 200):
                custom["max_connections"] = max_connections
            api_kw(api_client, {**custom, **kw})
        self._owns = api_client is None
        self.client = (
            api_client
            if api_client is not None
            else AsyncAPIClient(
                api_key, max_connections=max_connections, max_keepalive_connections=max_keepalive_connections, **kw
            )
        )

    async def aclose(self) -> None:
        if self._owns:
            await self.client.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        await self.aclose()
