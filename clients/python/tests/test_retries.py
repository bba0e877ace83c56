"""Retries against the real server: a create whose answer is lost is sent again with the same
idempotency key and makes one sandbox; a 429 is waited out (Retry-After) and then succeeds."""

from __future__ import annotations

import socket
import threading
from typing import Iterator, List
from urllib.parse import urlparse

import httpx
import pytest
from conftest import LABEL, Server, small

from sandtree import RateLimitError, SandboxClient


class AnswerDroppingProxy:
    """A TCP proxy in front of the server that, once, lets a create reach the server and then
    closes the connection instead of passing the answer back (a worker's network blip)."""

    def __init__(self, upstream: str) -> None:
        u = urlparse(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.armed = True
        self.dropped = 0
        self.socks: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            self.socks += [conn, up]
            first: List[bytes] = []
            threading.Thread(target=self._pump, args=(conn, up, first, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, conn, first, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, first: List[bytes], answers: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not answers and not first:
                    first.append(data)
                if answers and self.armed and first and first[0].startswith(b"POST /v1/sandboxes "):
                    # The server has answered (so the sandbox exists): the client never hears it.
                    self.armed = False
                    self.dropped += 1
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        for s in self.socks:
            s.close()


@pytest.fixture
def proxy(server: Server) -> Iterator[AnswerDroppingProxy]:
    p = AnswerDroppingProxy(server.url)
    yield p
    p.close()


def test_a_create_whose_answer_was_lost_is_retried_into_one_sandbox(
    server: Server, client: SandboxClient, proxy: AnswerDroppingProxy
) -> None:
    labels = {**LABEL, "case": "dropped-answer"}
    with SandboxClient(api_key=server.key, base_url=proxy.url) as through_proxy:
        sb = through_proxy.create(small(labels=labels))
    assert proxy.dropped == 1
    try:
        assert [s.id for s in client.list(labels=labels).sandboxes] == [sb.id]
    finally:
        client.bulk_delete(labels=labels)


def test_a_rate_limited_create_waits_for_retry_after_and_succeeds(server: Server, client: SandboxClient) -> None:
    admin = httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {server.key}"})
    team = admin.get("/v1/teams").json()["teams"][0]["name"]
    labels = {**LABEL, "case": "rate-limited"}
    r = admin.put(f"/v1/teams/{team}/limits", json={"max_creations_per_10s": 1})
    assert r.status_code == 200, r.text
    try:
        first = client.create(small(labels=labels))
        with SandboxClient(api_key=server.key, base_url=server.url, max_retries=0) as impatient:
            with pytest.raises(RateLimitError) as e:
                impatient.create(small(labels=labels))
        assert e.value.code == "RATE_LIMIT_BURST"
        assert e.value.retry_after is not None and e.value.retry_after > 0
        # The default client waits for Retry-After and sends it again.
        second = client.create(small(labels=labels))
        assert second.id != first.id
    finally:
        admin.put(f"/v1/teams/{team}/limits", json={"max_creations_per_10s": None})
        client.bulk_delete(labels=labels)
        admin.close()
