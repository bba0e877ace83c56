"""Creation pacing: at most `creations_per_10s` creates in any 10 s window, and a 429 (a quota
or rate limit the pacing did not foresee) waited out here instead of reaching the caller."""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import Deque, Optional

from ..errors import RateLimitError
from ..models import CreateSandboxRequest, Sandbox
from ..sandbox_client import SandboxClient

WINDOW_S = 10.5  # the server's window is 10 s; the extra half second absorbs clock skew


class Pacer:
    def __init__(self, creations_per_10s: Optional[int] = None, max_wait: float = 3600.0) -> None:
        self.limit = creations_per_10s
        self.max_wait = max_wait
        self._times: Deque[float] = deque()
        self._lock = threading.Lock()
        self.rate_limited = 0  # 429s waited out (the caller never saw them)

    def _reserve(self) -> None:
        if not self.limit:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                while self._times and now - self._times[0] >= WINDOW_S:
                    self._times.popleft()
                if len(self._times) < self.limit:
                    self._times.append(now)
                    return
                wait = self._times[0] + WINDOW_S - now
            time.sleep(max(wait, 0.01))

    def create(self, client: SandboxClient, request: CreateSandboxRequest) -> Sandbox:
        """`client.create(request)`, paced; 429s are retried after their Retry-After until max_wait."""
        deadline = time.monotonic() + self.max_wait
        attempt = 0
        while True:
            self._reserve()
            try:
                return client.create(request)
            except RateLimitError as e:
                attempt += 1
                with self._lock:
                    self.rate_limited += 1
                wait = e.retry_after if e.retry_after is not None else min(8.0, 0.25 * 2**attempt)
                wait += random.random() * 0.25
                if time.monotonic() + wait > deadline:
                    raise
                time.sleep(wait)
