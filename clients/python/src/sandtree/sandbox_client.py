"""SandboxClient: sandboxes of a sandtree server, with prime_sandboxes' methods.

Its methods are the generated synchronous twins (_sync_*.py, from _async_*.py by scripts/unasync.py)
of AsyncSandboxClient's, so each is written once.
"""

from __future__ import annotations

from typing import Any, Optional

from ._client_options import OUTPUT_CACHE_BYTES, OUTPUT_CONCURRENCY, OUTPUT_QUEUE_SIZE, api_kw, check_output_limits
from ._sync_checkpoints import Checkpoints
from ._sync_commands import Commands
from ._sync_desktop import Desktop
from ._sync_files import Files
from ._sync_sandboxes import Sandboxes
from ._sync_volumes import Volumes
from .api_client import APIClient


class SandboxClient(Sandboxes, Commands, Files, Checkpoints, Desktop, Volumes):
    """Sandboxes of a sandtree server.

    ``SandboxClient()`` finds the server from SANDTREE_API_URL / SANDTREE_API_KEY, then the local
    server's credentials.env; ``SandboxClient(api_key=..., base_url=...)`` or
    ``SandboxClient(APIClient(...))`` (prime_sandboxes' form) say it explicitly.
    """

    def __init__(
        self,
        api_client: Optional[APIClient] = None,
        *,
        background_job_output_concurrency: int = OUTPUT_CONCURRENCY,
        background_job_output_queue_size: int = OUTPUT_QUEUE_SIZE,
        background_job_output_cache_bytes: int = OUTPUT_CACHE_BYTES,
        **kw: Any,
    ) -> None:
        check_output_limits(background_job_output_concurrency, background_job_output_queue_size, background_job_output_cache_bytes)
        self.background_job_output_concurrency = background_job_output_concurrency
        api_kw(api_client, kw)
        self._owns = api_client is None
        self.client = api_client if api_client is not None else APIClient(**kw)

    def close(self) -> None:
        if self._owns:
            self.client.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
