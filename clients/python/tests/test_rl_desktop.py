"""sandtree.rl on a desktop: an episode forked from a desktop environment (a filesystem fork,
whose display the server brings up) records its desktop actions in the trajectory, and the events
sent past the episode (straight through the client) join it as the episode ends, as the server's
log has them. One small desktop VM for the setup and one for the episode."""

from __future__ import annotations

import json

from sandtree import SandboxClient
from sandtree.rl import Environment, EpisodeRunner, Trajectory

DESKTOP = Environment(image="sandtree/desktop", memory_gb=0.75, display={"width": 320, "height": 240}, timeout_minutes=30)


def test_an_episode_on_a_display_carries_its_desktop_events(client: SandboxClient) -> None:
    with EpisodeRunner(client, DESKTOP, name="py-rl-desktop", concurrency=1, labels={"suite": "python-sdk"}) as runner:
        with runner.episode() as ep:
            moved = ep.desktop({"type": "move", "x": 30, "y": 40})
            assert moved["pointer"] == {"x": 30, "y": 40}
            # Past the episode: the server's log has it, the trajectory not yet.
            client.desktop_act(ep.sandbox_id, {"type": "cursor"})
            log = client.desktop_events(ep.sandbox_id)
            assert [e["action"]["type"] for e in ep.trajectory.desktop_events()] == ["move"]
        events = ep.trajectory.desktop_events()
        assert events == log
        assert [e["action"]["type"] for e in events] == ["move", "cursor"]
        assert events[1]["result"] == {"x": 30, "y": 40}
        # The JSONL keeps them whole, beside the fork event that started the episode.
        back = Trajectory.from_jsonl(ep.trajectory.to_jsonl())
        assert [e.type for e in back.events] == ["fork", "desktop", "desktop"]
        assert back.desktop_events() == log
        line = json.loads(ep.trajectory.to_jsonl().splitlines()[1])
        assert line["desktop"]["screen_after"]["sha256"] == log[0]["screen_after"]["sha256"]
