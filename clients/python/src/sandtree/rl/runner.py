"""EpisodeRunner: prepares an Environment once (setup, then a checkpoint), starts episodes from
that state (a fork of the checkpoint, or a reset in place of a pooled sandbox), runs a policy on
each under a concurrency limit and creation pacing, and always cleans up: every sandbox carries
the runner's labels, a sweep by them runs at start and at exit, and each has a hard lifetime."""

from __future__ import annotations

import atexit
import copy
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

from ..errors import APIConnectionError, APIError, NotFoundError
from ..models import CreateSandboxRequest
from ..sandbox_client import SandboxClient
from .environment import Environment, SetupError
from .episode import Episode
from .pacing import Pacer
from .trajectory import Trajectory

Policy = Callable[[Episode], Any]
LABEL = "sandtree-rl"


@dataclass
class EpisodeResult:
    episode_id: str
    reward: Optional[float]
    trajectory: Trajectory
    error: Optional[BaseException] = None
    value: Any = None


class EpisodeRunner:
    """``with EpisodeRunner(client, env, name="w3") as runner: runner.run(policy, 100)``.

    `name` labels the runner's sandboxes (label ``sandtree-rl=<name>``): a runner restarted under
    the same name deletes what its killed predecessor left. `mode` is "fork" (each episode a new
    sandbox from the set-up checkpoint) or "reset" (a pool of up to `concurrency` sandboxes, each
    reset in place to a memory checkpoint before an episode).
    """

    def __init__(
        self,
        client: SandboxClient,
        environment: Environment,
        *,
        name: str = "default",
        concurrency: int = 4,
        creations_per_10s: Optional[int] = None,
        mode: str = "fork",
        labels: Optional[Dict[str, str]] = None,
        wait_timeout: float = 600.0,
    ) -> None:
        if mode not in ("fork", "reset"):
            raise ValueError('mode is "fork" or "reset"')
        self.client = client
        self.environment = environment
        self.name = name
        self.concurrency = concurrency
        self.mode = mode
        self.labels = {**(labels or {}), LABEL: name}
        self.wait_timeout = wait_timeout
        self.pacer = Pacer(creations_per_10s)
        self.checkpoint_id: Optional[str] = None
        self._memory_checkpoints: set = set()
        self._checkpoints: List[str] = []
        self._pool: "queue.Queue[str]" = queue.Queue()
        self._pooled = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._closed = False

    # Lifecycle

    def __enter__(self) -> EpisodeRunner:
        try:
            self.start()
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ raises
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        """Sweeps what an earlier runner of this name left, then runs the setup once and saves it."""
        self.sweep()
        atexit.register(self.close)
        env = self.environment
        sid = self.new_sandbox(image=env.image)
        try:
            if env.display is not None:
                self._wait_for_display(sid)
            for cmd in env.setup:
                r = self.client.execute_command(sid, cmd, working_dir=env.working_dir, env=env.env or None, timeout=env.setup_timeout)
                if r.exit_code != 0:
                    raise SetupError(f"setup {cmd!r} exited {r.exit_code}: {r.stderr[-500:]}")
            self.checkpoint_id = self.save_checkpoint(sid, memory=self.mode == "reset")
        finally:
            # The checkpoint is DURABLE: independent of the sandbox it came from.
            self.client.delete(sid)

    def _wait_for_display(self, sandbox_id: str) -> None:
        """The display is up (the setup's checkpoint must record it). GET .../desktop answers once
        it is; under TCG that can outlast one request's deadline, so a timed-out call is repeated."""
        deadline = time.monotonic() + self.wait_timeout
        while True:
            try:
                self.client.desktop_info(sandbox_id)
                return
            except APIConnectionError:
                if time.monotonic() > deadline:
                    raise

    def sweep(self) -> int:
        """Deletes every not yet ended sandbox with this runner's labels; how many there were."""
        return len(self.client.bulk_delete(labels=self.labels).deleted)

    def close(self) -> None:
        """Deletes the runner's sandboxes and checkpoints; safe to call twice, runs every step."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self.sweep()
        finally:
            for cp in self._checkpoints:
                try:
                    self.client.delete_checkpoint(cp)
                except (NotFoundError, APIError):
                    pass

    # Sandboxes and checkpoints

    def new_sandbox(self, image: Optional[str] = None, checkpoint_id: Optional[str] = None) -> str:
        """A RUNNING sandbox with the runner's labels and the environment's lifetime (paced)."""
        env = self.environment
        memory = checkpoint_id in self._memory_checkpoints
        request = CreateSandboxRequest(
            docker_image=image,
            # The display is configured once, by the setup sandbox; restores bring it back up.
            display=env.display if image is not None else None,
            checkpoint_id=checkpoint_id,
            restore_memory=True if memory else None,
            memory_gb=None if memory else env.memory_gb,
            cpu_cores=None if memory else env.cpu_cores,
            timeout_minutes=env.timeout_minutes,
            environment_vars=env.env or None,
            labels=dict(self.labels),
            idempotency_key=f"rl-{self.name}-{uuid.uuid4()}",
        )
        sb = self.pacer.create(self.client, request)
        try:
            self.client.wait_for_creation(sb.id, timeout=self.wait_timeout)
        except BaseException:
            self.client.delete(sb.id)
            raise
        return sb.id

    def save_checkpoint(self, sandbox_id: str, memory: bool = False) -> str:
        cp = self.client.checkpoint(sandbox_id, include_memory=memory)
        with self._lock:
            self._checkpoints.append(cp.id)
            if memory:
                self._memory_checkpoints.add(cp.id)
        self.client.wait_for_checkpoint(cp.id, timeout=self.wait_timeout)
        return cp.id

    def _require_started(self) -> str:
        if self.checkpoint_id is None or self._closed:
            raise RuntimeError("the runner is not started (use `with EpisodeRunner(...)` or start())")
        return self.checkpoint_id

    # Episodes

    @contextmanager
    def episode(self, episode_id: Optional[str] = None) -> Iterator[Episode]:
        """An episode from the set-up state; its sandbox is deleted (or pooled) when the block ends."""
        cp = self._require_started()
        tr = Trajectory(episode_id or uuid.uuid4().hex[:12])
        t0 = time.time()
        release: Callable[[str], Any]
        if self.mode == "fork":
            sid = self.new_sandbox(checkpoint_id=cp)
            tr.add("fork", sid, t0, checkpoint_id=cp)
            release = self.client.delete
        else:
            sid = self._take_pooled(cp)
            tr.add("reset", sid, t0, checkpoint_id=cp)
            release = self._pool.put
        try:
            ep = Episode(self, sid, tr)
            yield ep
            self._end_desktop(ep)
        finally:
            release(sid)

    def _end_desktop(self, ep: Episode) -> None:
        """On a display, the episode's trajectory takes the desktop log's events it lacks (read
        before the sandbox goes; not after a policy raised: that episode has no trajectory)."""
        if self.environment.display is not None:
            ep.sync_desktop()

    def _take_pooled(self, cp: str) -> str:
        with self._lock:
            grow = self._pool.empty() and self._pooled < self.concurrency
            if grow:
                self._pooled += 1
        if grow:
            try:
                return self.new_sandbox(checkpoint_id=cp)  # restored from the memory checkpoint already
            except BaseException:
                with self._lock:
                    self._pooled -= 1
                raise
        sid = self._pool.get()
        try:
            self.client.reset(sid, cp)
        except BaseException:
            with self._lock:
                self._pooled -= 1
            self.client.delete(sid)
            raise
        return sid

    @contextmanager
    def branch(self, parent: Episode, checkpoint_id: str) -> Iterator[Episode]:
        """A new episode from a checkpoint of `parent`; its trajectory continues the parent's."""
        t0 = time.time()
        sid = self.new_sandbox(checkpoint_id=checkpoint_id)
        tr = Trajectory(uuid.uuid4().hex[:12], [copy.copy(e) for e in parent.trajectory.events])
        tr.add("fork", sid, t0, checkpoint_id=checkpoint_id)
        try:
            ep = Episode(self, sid, tr)
            yield ep
            self._end_desktop(ep)
        finally:
            self.client.delete(sid)

    def run_episode(self, policy: Policy, episode_id: Optional[str] = None) -> EpisodeResult:
        """Runs `policy` on one episode and scores it; a policy's exception is raised after cleanup."""
        with self._slots, self.episode(episode_id) as ep:
            value = policy(ep)
            reward = ep.score() if self.environment.verifier is not None else None
            return EpisodeResult(ep.id, reward, ep.trajectory, value=value)

    def run(self, policy: Policy, n: int) -> List[EpisodeResult]:
        """`n` episodes, at most `concurrency` at a time; a failed one has `error` set (and no reward)."""
        self._require_started()

        def one(i: int) -> EpisodeResult:
            eid = f"{self.name}-{i}"
            try:
                return self.run_episode(policy, eid)
            except Exception as e:  # noqa: BLE001 - recorded in the result, the run goes on
                return EpisodeResult(eid, None, Trajectory(eid), error=e)

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, range(n)))
