"""Commands: buffered, streamed, and background jobs (AsyncSandboxClient's part)."""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Dict, List, Optional, Union

from . import _calls as c
from ._async_base import AsyncBase
from ._calls import Command
from .models import BackgroundJob, BackgroundJobStatus, BackgroundJobStatusSnapshot, CommandResponse, ExecEvent


class AsyncCommands(AsyncBase):
    async def execute_command(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
        user: Optional[str] = None,
        *,
        stdin: Optional[str] = None,
    ) -> CommandResponse:
        """Runs a command (a string under /bin/sh -c, a list as argv) and buffers its output.

        CommandTimeoutError when it runs past `timeout` seconds (the server kills it).
        """
        result: CommandResponse = await self._run(c.execute(sandbox_id, command, working_dir, env, timeout, user, stdin))
        return result

    async def execute_command_stream(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
        user: Optional[str] = None,
    ) -> AsyncIterator[ExecEvent]:
        """Runs a command and yields its events as they come ("started", "stdout", "stderr", "exit").

        Closing the iterator early (``aclose()`` or leaving the loop) kills the command.
        """
        call = c.streamed(c.execute(sandbox_id, command, working_dir, env, timeout, user, None))
        async with self.client.stream(call.method, call.path, **call.kw) as r:
            decoder = call.parse(r.headers.get("content-type"))
            async for chunk in r.aiter_bytes():
                for event in decoder.push(chunk):
                    yield event
            decoder.finish()

    async def start_background_job(
        self,
        sandbox_id: str,
        command: Command,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        user: Optional[str] = None,
    ) -> BackgroundJob:
        """Starts a detached command that runs until it ends or the sandbox ends."""
        result: BackgroundJob = await self._run(c.start_job(sandbox_id, command, working_dir, env, user))
        return result

    async def get_background_job(
        self, sandbox_id: str, job: Union[str, BackgroundJob], timeout: Optional[float] = None
    ) -> BackgroundJobStatus:
        """A job's state and the last 16 KiB of each stream; `timeout`: seconds for this request."""
        result: BackgroundJobStatus = await self._run(c.get_job(sandbox_id, job, timeout))
        return result

    async def get_background_job_status(
        self, sandbox_id: str, job: Union[str, BackgroundJob], timeout: Optional[float] = None
    ) -> BackgroundJobStatusSnapshot:
        """A job's state without its output."""
        return BackgroundJobStatusSnapshot.of(sandbox_id, await self.get_background_job(sandbox_id, job, timeout))

    async def get_background_job_statuses(
        self, jobs: List[BackgroundJob], timeout: Optional[float] = None
    ) -> List[BackgroundJobStatusSnapshot]:
        """The states of several jobs (of any sandboxes), in order. They are read one after another,
        within any `background_job_output_concurrency`; no output is cached."""
        return [await self.get_background_job_status(j.sandbox_id, j, timeout) for j in jobs]

    async def get_background_jobs(self, jobs: List[BackgroundJob], timeout: Optional[float] = None) -> List[BackgroundJobStatus]:
        """The states and output tails of several jobs, in order (read as get_background_job_statuses)."""
        return [await self.get_background_job(j.sandbox_id, j, timeout) for j in jobs]

    async def run_background_job(
        self,
        sandbox_id: str,
        command: Command,
        timeout: float = 900,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        poll_interval: float = 3,
    ) -> BackgroundJobStatus:
        """Starts a job and polls until it ends; CommandTimeoutError after `timeout` s (the job keeps running)."""
        job = await self.start_background_job(sandbox_id, command, working_dir=working_dir, env=env)
        deadline = time.monotonic() + timeout
        while True:
            status = await self.get_background_job(sandbox_id, job)
            if status.completed:
                return status
            if time.monotonic() + poll_interval > deadline:
                raise c.job_timeout(sandbox_id, command, timeout, status.status)
            await asyncio.sleep(poll_interval)
