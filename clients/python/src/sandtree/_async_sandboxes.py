"""Sandboxes: create, read, list, delete, wait, logs, network and ports (AsyncSandboxClient's part)."""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Optional, Sequence

from . import _calls as c
from . import _prime_args as pa
from ._async_base import AsyncBase
from .models import (
    BatchSandboxStatusResponse,
    BulkDeleteSandboxResponse,
    CreateSandboxRequest,
    ExposedPort,
    Sandbox,
    SandboxListResponse,
    SandboxNetwork,
    SandboxStatus,
)

_LIST_PAGE = 1000  # the server's largest page


class AsyncSandboxes(AsyncBase):
    async def create(self, request: CreateSandboxRequest) -> Sandbox:
        """Creates a sandbox (PENDING until provisioned: see wait_for_creation)."""
        sandbox: Sandbox = await self._run(c.create(request))
        if request.team_id is not None and sandbox.team_id != request.team_id:
            await self.delete(sandbox.id)
            raise ValueError(
                f"team_id={request.team_id!r}: this key belongs to team {sandbox.team_id!r} (the sandbox it made "
                "was deleted); leave team_id unset or use a key of that team"
            )
        return sandbox

    async def get(self, sandbox_id: str) -> Sandbox:
        result: Sandbox = await self._run(c.get(sandbox_id))
        return result

    async def list(
        self,
        team_id: Optional[str] = None,
        status: Optional[str] = None,
        labels: pa.Labels = None,
        page: int = 1,
        per_page: int = 50,
        exclude_terminated: Optional[bool] = None,
        user_id: Optional[str] = None,
        *,
        cursor: Optional[str] = None,
    ) -> SandboxListResponse:
        """Page `page` (from 1) of `per_page` sandboxes, with `total` and `has_next`.

        `labels` is a dict, or prime_sandboxes' list ("k=v" or "k"); a sandbox must carry all. With
        `cursor` (sandtree's paging: pass `next_cursor` back) one page of the server is returned as is.
        """
        pa.check_unset({"user_id": user_id}, pa.WHY)
        if page < 1 or per_page < 1:
            raise ValueError("page and per_page start at 1")
        wanted = pa.labels_dict(labels)
        if cursor is not None:
            result: SandboxListResponse = await self._run(c.list_(status, wanted, per_page, cursor))
            result.per_page = per_page
            return result
        found = [
            s
            for s in await self._all(status, wanted)
            if (team_id is None or s.team_id == team_id) and not (exclude_terminated and s.status.is_terminal)
        ]
        start = (page - 1) * per_page
        return SandboxListResponse(
            found[start : start + per_page], total=len(found), page=page, per_page=per_page, has_next=start + per_page < len(found)
        )

    async def _all(self, status: Optional[str], labels: Optional[Dict[str, str]]) -> List[Sandbox]:
        out: List[Sandbox] = []
        cursor: Optional[str] = None
        while True:
            part: SandboxListResponse = await self._run(c.list_(status, labels, _LIST_PAGE, cursor))
            out += part.sandboxes
            if not part.next_cursor:
                return out
            cursor = part.next_cursor

    async def delete(self, sandbox_id: str) -> Sandbox:
        """Terminates the sandbox; deleting twice is fine."""
        result: Sandbox = await self._run(c.delete(sandbox_id))
        return result

    async def bulk_delete(
        self,
        sandbox_ids: Optional[List[str]] = None,
        labels: pa.Labels = None,
        team_id: Optional[str] = None,
        user_id: Optional[str] = None,
        all_users: bool = False,
    ) -> BulkDeleteSandboxResponse:
        """Deletes the given sandboxes, or every not yet ended one carrying all of `labels`.

        A key sees its whole team (sandtree has no users within a team), so `all_users` changes
        nothing; `team_id` only deletes sandboxes of that team (the others fail as not found).
        """
        pa.check_unset({"user_id": user_id}, pa.WHY)
        wanted = pa.labels_dict(labels)
        if team_id is None:
            result: BulkDeleteSandboxResponse = await self._run(c.bulk_delete(sandbox_ids, wanted))
            return result
        if (sandbox_ids is None) == (wanted is None):
            raise ValueError("give exactly one of sandbox_ids or labels")
        theirs = {s.id for s in await self._all(None, wanted) if s.team_id == team_id}
        ids = [i for i in (sandbox_ids if sandbox_ids is not None else sorted(theirs)) if i in theirs]
        result = await self._run(c.bulk_delete(ids, None)) if ids else BulkDeleteSandboxResponse([], [], "0 deleted")
        result.failed += [{"sandbox_id": i, "error": "SANDBOX_NOT_FOUND"} for i in sandbox_ids or [] if i not in theirs]
        return result

    async def get_sandbox_statuses(self, sandbox_ids: Sequence[str]) -> BatchSandboxStatusResponse:
        """Statuses of any number of sandboxes (100 per call); unknown ids are in `errors`."""
        return c.merge_statuses([await self._run(c.batch_status(ids)) for ids in c.chunks(sandbox_ids)])

    async def wait_for_creation(
        self,
        sandbox_id: str,
        max_attempts: int = 60,
        stability_checks: int = 1,
        image_build_timeout_seconds: int = 3000,
        *,
        timeout: Optional[float] = None,
        poll_interval: float = 0.5,
    ) -> Sandbox:
        """Polls until RUNNING and returns the sandbox; SandboxNotRunningError if it ends.

        The wait lasts what prime_sandboxes gives `max_attempts` (60: 115 s), or `timeout` seconds;
        running out raises SandboxWaitTimeoutError (a SandboxNotRunningError and a TimeoutError).
        A sandbox is RUNNING once its guest agent answered, which is the first of `stability_checks`;
        each further one asks the agent again. sandtree never builds images while a sandbox waits,
        so `image_build_timeout_seconds` never starts.
        """
        if not isinstance(stability_checks, int) or stability_checks < 1:
            raise ValueError("stability_checks must be a positive integer")
        pa.positive("image_build_timeout_seconds", image_build_timeout_seconds)
        budget = pa.positive("timeout", timeout) or pa.creation_timeout(max_attempts)
        await self.bulk_wait_for_creation([sandbox_id], timeout=budget, poll_interval=poll_interval)
        for _ in range(stability_checks - 1):
            await self._run(c.file_stat(sandbox_id, "/"))
        return await self.get(sandbox_id)

    async def bulk_wait_for_creation(
        self,
        sandbox_ids: List[str],
        max_attempts: int = 60,
        image_build_timeout_seconds: int = 3000,
        *,
        timeout: Optional[float] = None,
        poll_interval: float = 0.5,
    ) -> Dict[str, str]:
        """Waits until every sandbox is RUNNING, polling their statuses in batches; {id: "RUNNING"}.

        Budget and errors as wait_for_creation (an unknown id is a SandboxNotFoundError).
        """
        pa.positive("image_build_timeout_seconds", image_build_timeout_seconds)
        budget = pa.positive("timeout", timeout) or pa.creation_timeout(max_attempts)
        deadline = time.monotonic() + budget
        waiting = list(dict.fromkeys(sandbox_ids))
        done: Dict[str, str] = {}
        last: Optional[str] = None
        while True:
            statuses = await self.get_sandbox_statuses(waiting)
            if statuses.errors:
                await self.get(statuses.errors[0].sandbox_id)  # raises SandboxNotFoundError
            for e in statuses.statuses:
                if c.running(e.sandbox_id, e.status, e.error_message):
                    done[e.sandbox_id] = SandboxStatus.RUNNING
                else:
                    last = f"{e.sandbox_id} {e.status.value}"
            waiting = [s for s in waiting if s not in done]
            if not waiting:
                return done
            if time.monotonic() + poll_interval > deadline:
                raise c.wait_timeout(f"{len(waiting)} sandbox(es) not RUNNING", budget, last, waiting[0])
            await asyncio.sleep(poll_interval)

    async def get_logs(self, sandbox_id: str, *, tail_bytes: Optional[int] = None) -> str:
        """The sandbox's console output (the end of it)."""
        result: str = await self._run(c.logs(sandbox_id, tail_bytes))
        return result

    # Network and ports

    async def get_network(self, sandbox_id: str) -> SandboxNetwork:
        result: SandboxNetwork = await self._run(c.get_network(sandbox_id))
        return result

    async def set_network(
        self,
        sandbox_id: str,
        *,
        allow: Optional[List[str]] = None,
        deny: Optional[List[str]] = None,
        network_allowlist: Optional[List[str]] = None,
        network_denylist: Optional[List[str]] = None,
    ) -> SandboxNetwork:
        """Replaces the egress policy of a running sandbox: `allow` (or network_allowlist) only these
        destinations, `deny` (or network_denylist) all but these; neither: the server's default."""
        if (allow is not None and network_allowlist is not None) or (deny is not None and network_denylist is not None):
            raise ValueError("give allow or network_allowlist (deny or network_denylist), not both")
        allowlist = allow if allow is not None else network_allowlist
        denylist = deny if deny is not None else network_denylist
        result: SandboxNetwork = await self._run(c.set_network(sandbox_id, allowlist, denylist))
        return result

    async def expose(self, sandbox_id: str, port: int, name: Optional[str] = None) -> ExposedPort:
        """Makes `port` reachable through the server (`url`, `tcp_url`, with `token`).

        `name` is in the signature for code written for older prime_sandboxes; sandtree's exposed
        ports have no names, so a name is refused rather than dropped.
        """
        if name is not None:
            raise ValueError("expose(name=...): sandtree's exposed ports have no names; call expose(sandbox_id, port)")
        result: ExposedPort = await self._run(c.expose(sandbox_id, port))
        return result

    async def unexpose(self, sandbox_id: str, port: int) -> None:
        await self._run(c.unexpose(sandbox_id, port))

    async def list_exposed_ports(self, sandbox_id: str) -> List[ExposedPort]:
        result: List[ExposedPort] = await self._run(c.list_ports(sandbox_id))
        return result
