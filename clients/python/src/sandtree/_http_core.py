"""HTTP beneath the sandbox clients: auth, User-Agent, typed errors and retries (what the
sync and async clients share; their send loops are in _async_http.py and its generated twin).

Retries: a 429 (and a refused connection) never reached the handler, so any request is sent
again; 5xx answers and broken connections only when sending again cannot do the work twice
(`idempotent`: GET/PUT/DELETE, or a create carrying an idempotency key). Retry-After is honoured.
"""

from __future__ import annotations

import email.utils
import random
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import httpx

from . import _config
from .errors import APIConnectionError, APIError, APITimeoutError, RateLimitError, error_for

Params = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]
# A body that can be produced again for each attempt (a streamed upload is re-read from its start).
Body = Union[bytes, Callable[[], Any], None]

_RETRIED_STATUSES = {500, 502, 503, 504}
_IDEMPOTENT_METHODS = {"GET", "HEAD", "PUT", "DELETE"}


class _Default:
    pass


DEFAULT: Any = _Default()


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _error_from_response(r: httpx.Response, body: bytes) -> APIError:
    import json

    payload: Dict[str, Any] = {}
    try:
        parsed = json.loads(body) if body else {}
        if isinstance(parsed, dict):
            payload = parsed
    except ValueError:
        pass
    code = str(payload.get("code") or ("UNAUTHORIZED" if r.status_code == 401 else "HTTP_ERROR"))
    message = str(payload.get("message") or body[:200].decode("utf-8", "replace") or r.reason_phrase)
    details = payload.get("details") if isinstance(payload.get("details"), dict) else None
    request_id = payload.get("request_id") or payload.get("requestId") or r.headers.get("x-request-id")
    return error_for(
        code,
        message,
        status=r.status_code,
        details=details,
        request_id=str(request_id) if request_id else None,
        retry_after=_retry_after(r.headers.get("retry-after")),
    )


def _connection_error(e: Exception, method: str, url: str) -> APIConnectionError:
    if isinstance(e, httpx.TimeoutException):
        return APITimeoutError(f"{method} {url}: no answer in time ({e!r})", code="TIMEOUT", status=0)
    return APIConnectionError(f"{method} {url}: {e}", code="CONNECTION_ERROR", status=0)


def _prime_kw(params: Any, json: Any, timeout: Optional[float], idempotent_post: bool) -> Dict[str, Any]:
    kw: Dict[str, Any] = {"params": params, "json": json, "timeout": DEFAULT if timeout is None else timeout}
    if idempotent_post:
        kw["idempotent"] = True
    return kw


class _Policy:
    def __init__(self, max_retries: int, initial_delay: float = 0.25, max_delay: float = 8.0, max_retry_after: float = 60.0):
        self.max_retries = max_retries
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after

    def delay(self, err: Exception, attempt: int, idempotent: bool) -> Optional[float]:
        """Seconds to wait before attempt `attempt + 1` (counted from 1); None: raise `err`."""
        if attempt > self.max_retries:
            return None
        if isinstance(err, RateLimitError):
            if err.retry_after is not None:
                if err.retry_after > self.max_retry_after:
                    return None
                return err.retry_after + random.random() * min(1.0, self.initial_delay)
        elif isinstance(err, APIConnectionError):
            refused = isinstance(err.__cause__, httpx.ConnectError)
            if not (idempotent or refused):
                return None
        elif isinstance(err, APIError):
            if not (idempotent and err.status in _RETRIED_STATUSES):
                return None
        else:
            return None
        ceiling = min(self.max_delay, self.initial_delay * 2 ** (attempt - 1))
        # Half fixed, half random: waits grow but never line up across clients.
        return ceiling / 2 + random.random() * ceiling / 2


class _Base:
    """prime_sandboxes' parameters first (api_key, require_auth, user_agent), sandtree's after `*`.

    `request`, `get`, `post`, `patch` and `delete` take prime_sandboxes' arguments and return the
    answer's JSON; their `endpoint` is a path of sandtree's API (``/v1/sandboxes``), which is not
    Prime's (``/sandbox``): a Prime path answers 404 ROUTE_NOT_FOUND.
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        require_auth: bool = True,
        user_agent: Optional[str] = None,
        *,
        base_url: Optional[str] = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        max_connections: Optional[int] = None,
        max_keepalive_connections: Optional[int] = None,
    ) -> None:
        self.base_url, key = _config.resolve(api_key, base_url, require_key=require_auth)
        self.api_key: Optional[str] = key or None
        self.require_auth = require_auth
        self.timeout = timeout
        self.user_agent = _config.user_agent(user_agent)
        self._policy = _Policy(max_retries)
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive_connections)

    def _headers(self, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"user-agent": self.user_agent, "accept": "application/json"}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        if extra:
            h.update(extra)
        return h

    def _timeout(self, timeout: Any) -> Optional[httpx.Timeout]:
        t = self.timeout if timeout is DEFAULT else timeout
        # None: no read deadline (a command or a transfer may take as long as it takes).
        return httpx.Timeout(self.timeout, read=None, write=None) if t is None else httpx.Timeout(t)

    @staticmethod
    def _idempotent(method: str, idempotent: Optional[bool]) -> bool:
        return method in _IDEMPOTENT_METHODS if idempotent is None else idempotent


def _params(params: Params) -> List[Tuple[str, Any]]:
    items = list(params.items()) if isinstance(params, Mapping) else list(params or [])
    out: List[Tuple[str, Any]] = []
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, v))
    return out
