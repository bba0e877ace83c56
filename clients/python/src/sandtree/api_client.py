"""The HTTP clients beneath the sandbox clients (APIClient, AsyncAPIClient) and what they share.

AsyncAPIClient is written in _async_http.py; APIClient is its generated twin (_sync_http.py).
"""

from ._async_http import AsyncAPIClient
from ._http_core import DEFAULT, Body, Params, _Base, _Policy, _retry_after
from ._sync_http import APIClient

__all__ = ["APIClient", "AsyncAPIClient", "DEFAULT", "Body", "Params", "_Base", "_Policy", "_retry_after"]
