"""Replay of an episode's last K steps from its nearest checkpoint: a new sandbox restores the
last saved state (fork, reset or checkpoint event) before those steps and runs every command and
file write after it again; the replayed events are compared by outcome with the originals."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List

from .runner import EpisodeRunner
from .trajectory import REPLAYED, STATE_EVENTS, Event, Trajectory, command_event, write_event


@dataclass
class ReplayResult:
    checkpoint_id: str
    original: List[Event]
    replayed: List[Event]

    @property
    def matches(self) -> bool:
        return len(self.original) == len(self.replayed) and all(
            a.same_outcome(b) for a, b in zip(self.original, self.replayed)
        )


def replay(runner: EpisodeRunner, trajectory: Trajectory, last_k: int) -> ReplayResult:
    events = trajectory.events
    steps = [i for i, e in enumerate(events) if e.type in REPLAYED]
    if not 0 < last_k <= len(steps):
        raise ValueError(f"last_k must be 1..{len(steps)}")
    first = steps[len(steps) - last_k]
    base = next(i for i in range(first, -1, -1) if events[i].type in STATE_EVENTS and events[i].checkpoint_id)
    cp = events[base].checkpoint_id
    assert cp is not None
    redo = [e for e in events[base + 1 :] if e.type in REPLAYED]
    env = runner.environment
    sid = runner.new_sandbox(checkpoint_id=cp)
    out = Trajectory(f"{trajectory.episode_id}-replay")
    try:
        for e in redo:
            t0 = time.time()
            if e.type == "command":
                r = runner.client.execute_command(sid, e.command, working_dir=env.working_dir, env=env.env or None)
                command_event(out, sid, t0, e.command, r.exit_code, r.stdout, r.stderr)
            else:
                runner.client.upload_bytes(sid, e.path or "", e.data)
                write_event(out, sid, t0, e.path or "", e.data)
    finally:
        runner.client.delete(sid)
    return ReplayResult(cp, redo[-last_k:], out.events[-last_k:])
