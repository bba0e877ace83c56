"""The HTTP client beneath the sandbox client: written once here, async; scripts/unasync.py
writes its synchronous twin (_sync_http.py)."""
# GENERATED from _async_http.py by scripts/unasync.py: edit _async_http.py and run it again.

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Dict, Mapping, Optional

import httpx

from ._http_core import DEFAULT, Body, Params, _Base, _connection_error, _error_from_response, _params, _prime_kw
from .errors import APIError


class APIClient(_Base):
    """HTTP client of the sandtree API (httpx): auth, typed errors and retries (see _http_core)."""

    def __init__(self, api_key: Optional[str] = None, require_auth: bool = True, user_agent: Optional[str] = None, **kw: Any) -> None:
        super().__init__(api_key, require_auth, user_agent, **kw)
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout, limits=self._limits)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> APIClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        json: Any = None,
        content: Body = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotent: Optional[bool] = None,
        timeout: Any = DEFAULT,
    ) -> Iterator[httpx.Response]:
        """An answer whose body is not read yet (a 2xx one: errors are raised, retried as described in _http_core)."""
        retry = self._idempotent(method, idempotent)
        attempt = 0
        while True:
            attempt += 1
            body = content() if callable(content) else content
            req = self._http.build_request(
                method, path, params=_params(params), json=json, content=body, headers=self._headers(headers),
                timeout=self._timeout(timeout),
            )
            try:
                r = self._http.send(req, stream=True)
            except httpx.TransportError as e:
                err: APIError = _connection_error(e, method, path)
                err.__cause__ = e
            else:
                if r.status_code < 400:
                    try:
                        yield r
                    finally:
                        r.close()
                    return
                try:
                    err = _error_from_response(r, r.read())
                finally:
                    r.close()
            wait = self._policy.delay(err, attempt, retry)
            if wait is None:
                raise err
            time.sleep(wait)

    def send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The whole answer, read (the body is in `.content`)."""
        try:
            with self.stream(method, path, **kw) as r:
                r.read()
                return r
        except httpx.TransportError as e:
            raise _connection_error(e, method, path) from e

    def json(self, method: str, path: str, **kw: Any) -> Any:
        r = self.send(method, path, **kw)
        return r.json() if r.content else None

    def request(
        self,
        method: str,
        endpoint: str,
        params: Optional[Dict[str, Any]] = None,
        json: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        idempotent_post: bool = False,
    ) -> Dict[str, Any]:
        """prime_sandboxes' call: the JSON answer of `method endpoint` ({} for an empty one)."""
        return self.json(method, endpoint, **_prime_kw(params, json, timeout, idempotent_post)) or {}

    def get(self, endpoint: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("GET", endpoint, params=params)

    def post(self, endpoint: str, json: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("POST", endpoint, json=json)

    def patch(self, endpoint: str, json: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("PATCH", endpoint, json=json)

    def delete(self, endpoint: str) -> Dict[str, Any]:
        return self.request("DELETE", endpoint)
