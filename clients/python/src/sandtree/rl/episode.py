"""Episode: one sandbox started from a saved state, the policy's actions on it (each recorded
in the trajectory) and its score."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Union

from .._calls import Command
from ..command_models import CommandResponse
from ..errors import APIError
from .trajectory import Trajectory, command_event, write_event

if TYPE_CHECKING:
    from .runner import EpisodeRunner

# An action: a command to run, or a function that acts on the episode.
Action = Union[str, Command, Callable[["Episode"], Any]]


class Episode:
    def __init__(self, runner: EpisodeRunner, sandbox_id: str, trajectory: Trajectory) -> None:
        self.runner = runner
        self.sandbox_id = sandbox_id
        self.trajectory = trajectory
        self.reward: Optional[float] = None

    @property
    def id(self) -> str:
        return self.trajectory.episode_id

    def run(self, command: Command, timeout: Optional[float] = None) -> CommandResponse:
        env = self.runner.environment
        t0 = time.time()
        r = self.runner.client.execute_command(self.sandbox_id, command, working_dir=env.working_dir, env=env.env or None, timeout=timeout)
        command_event(self.trajectory, self.sandbox_id, t0, command, r.exit_code, r.stdout, r.stderr)
        return r

    def write_file(self, path: str, data: Union[str, bytes]) -> None:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        t0 = time.time()
        self.runner.client.upload_bytes(self.sandbox_id, path, raw)
        write_event(self.trajectory, self.sandbox_id, t0, path, raw)

    def desktop(self, action: Dict[str, Any]) -> Dict[str, Any]:
        """One desktop action (e.g. {"type": "click", "x": 10, "y": 20}) on the episode's display;
        its DesktopEvent goes into the trajectory, a failed one too (then the error is raised)."""
        try:
            event = self.runner.client.desktop_act(self.sandbox_id, action)
        except APIError as err:
            failed = err.details.get("event")
            if isinstance(failed, dict):
                self.trajectory.add_desktop(self.sandbox_id, failed)
            raise
        self.trajectory.add_desktop(self.sandbox_id, event)
        return event

    def sync_desktop(self) -> int:
        """Adds the desktop log's events the trajectory lacks (actions sent past `desktop()`, and
        the log the episode's start state carried: a fork's log begins with its parent's). The
        runner calls it as an episode on a display ends; returns how many were added."""
        added = 0
        for event in self.runner.client.desktop_events(self.sandbox_id):
            if self.trajectory.add_desktop(self.sandbox_id, event):
                added += 1
        return added

    def act(self, action: Action) -> Any:
        return action(self) if callable(action) else self.run(action)

    def checkpoint(self) -> str:
        """Saves the episode's files (DURABLE before it returns); replays and branches start here."""
        t0 = time.time()
        cp_id = self.runner.save_checkpoint(self.sandbox_id)
        self.trajectory.add("checkpoint", self.sandbox_id, t0, checkpoint_id=cp_id)
        return cp_id

    def score(self) -> float:
        """Runs the environment's verifier: its reward (also kept in `reward`)."""
        env = self.runner.environment
        if env.verifier is None:
            raise ValueError("the environment has no verifier")
        t0 = time.time()
        r = self.runner.client.execute_command(self.sandbox_id, env.verifier, working_dir=env.working_dir, env=env.env or None)
        self.reward = env.reward(r)
        command_event(self.trajectory, self.sandbox_id, t0, env.verifier, r.exit_code, r.stdout, r.stderr, type="verify", reward=self.reward)
        return self.reward
