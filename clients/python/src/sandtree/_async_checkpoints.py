"""Checkpoints, forks, pause, resume and reset (AsyncSandboxClient's part)."""

from __future__ import annotations

import asyncio
import time
from typing import List, Optional

from . import _calls as c
from . import _prime_args as pa
from ._async_base import AsyncBase
from .errors import APIError
from .models import (
    BatchCheckpointResponse,
    Checkpoint,
    CheckpointLookupError,
    DeleteSandboxCheckpointsResponse,
    Sandbox,
)


def _lookup_error(checkpoint_id: str, e: APIError) -> CheckpointLookupError:
    return CheckpointLookupError(checkpoint_id, e.code, e.message)


class AsyncCheckpoints(AsyncBase):
    async def checkpoint(
        self, sandbox_id: str, *, include_memory: bool = False, ttl_seconds: Optional[int] = None
    ) -> Checkpoint:
        """Saves the sandbox's files (and with include_memory its RAM); usually FROZEN at once, DURABLE later."""
        result: Checkpoint = await self._run(c.checkpoint(sandbox_id, include_memory, ttl_seconds))
        return result

    async def get_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        result: Checkpoint = await self._run(c.get_checkpoint(checkpoint_id))
        return result

    async def get_checkpoints(self, checkpoint_ids: List[str]) -> BatchCheckpointResponse:
        """Several checkpoints, in order; an id not found (or not the team's) is in `errors`."""
        out = BatchCheckpointResponse([], [])
        for cid in checkpoint_ids:
            try:
                out.checkpoints.append(await self.get_checkpoint(cid))
            except APIError as e:
                if e.status != 404:
                    raise
                out.errors.append(_lookup_error(cid, e))
        return out

    async def list_checkpoints(self, sandbox_id: Optional[str] = None, checkpoint_id: Optional[str] = None) -> List[Checkpoint]:
        """A sandbox's checkpoints (without sandbox_id: the whole team's), or only `checkpoint_id`."""
        result: List[Checkpoint] = await self._run(c.list_checkpoints(sandbox_id))
        return [cp for cp in result if checkpoint_id is None or cp.id == checkpoint_id]

    async def delete_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        result: Checkpoint = await self._run(c.delete_checkpoint(checkpoint_id))
        return result

    async def delete_sandbox_checkpoints(self, sandbox_id: str) -> DeleteSandboxCheckpointsResponse:
        """Deletes each checkpoint of a sandbox; one the server refuses (e.g. 409) is in `errors`."""
        out = DeleteSandboxCheckpointsResponse([], [])
        for cp in await self.list_checkpoints(sandbox_id):
            try:
                await self.delete_checkpoint(cp.id)
                out.deleted.append(cp.id)
            except APIError as e:
                out.errors.append(_lookup_error(cp.id, e))
        return out

    async def wait_for_checkpoint(
        self,
        checkpoint_id: str,
        timeout_seconds: float = 300,
        *,
        timeout: Optional[float] = None,
        poll_interval: float = 0.2,
    ) -> Checkpoint:
        """Polls until DURABLE, for `timeout_seconds` (or sandtree's earlier name `timeout`).

        CheckpointFailedError (a RuntimeError) on FAILED or DELETING, TimeoutError when time runs out.
        """
        if timeout is not None:
            timeout_seconds = timeout
        pa.positive("timeout_seconds", timeout_seconds)
        deadline = time.monotonic() + timeout_seconds
        while True:
            cp = await self.get_checkpoint(checkpoint_id)
            if c.checkpoint_done(cp):
                return cp
            if time.monotonic() + poll_interval > deadline:
                raise TimeoutError(
                    f"checkpoint {checkpoint_id} not DURABLE after {timeout_seconds} s (still {cp.state.value}); "
                    "wait longer (timeout_seconds=)"
                )
            await asyncio.sleep(poll_interval)

    async def fork(
        self,
        sandbox_id: str,
        name: Optional[str] = None,
        cpu_cores: Optional[int] = None,
        memory_gb: Optional[float] = None,
        timeout_minutes: Optional[float] = None,
        memory: bool = False,
        wait_timeout_seconds: Optional[float] = None,
        *,
        volumes: Optional[str] = None,
    ) -> Sandbox:
        """Checkpoints the sandbox and starts a child with its files (and with memory=True its processes).

        volumes="snapshot" mounts a copy-on-write snapshot of each of the parent's volumes (new volumes
        of the team) instead of the same ones ("shared", the default)."""
        call = c.fork(sandbox_id, name, cpu_cores, memory_gb, timeout_minutes, memory, wait_timeout_seconds, volumes)
        result: Sandbox = await self._run(call)
        return result

    async def pause(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = await self._run(c.pause(sandbox_id))
        return result

    async def resume(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = await self._run(c.resume(sandbox_id))
        return result

    async def reset(self, sandbox_id: str, checkpoint_id: str) -> Sandbox:
        """Puts a running sandbox back to a memory checkpoint's state, keeping its id."""
        result: Sandbox = await self._run(c.reset(sandbox_id, checkpoint_id))
        return result
