"""sandtree.rl against the real server with busybox sandboxes: cleanup after a policy throws and
after the runner is SIGKILLed, pacing under a low quota (no 429 reaches the caller), best-of-N,
tree search shape and scores, reset-in-place episodes, trajectories as JSONL and their replay."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import httpx
import pytest
from conftest import Server

from sandtree import SandboxClient, SandboxStatus
from sandtree.rl import LABEL, Environment, Episode, EpisodeRunner, Trajectory, best_of_n, replay, tree_search

ACTIVE = {SandboxStatus.PENDING, SandboxStatus.PROVISIONING, SandboxStatus.RUNNING}
ENV = Environment(image="sandtree/busybox", setup=["echo 0 > /root/score"], verifier="cat /root/score", timeout_minutes=30)


def add(k: int) -> str:
    """An action: adds k to the score the verifier prints."""
    return f"echo $(( $(cat /root/score) + {k} )) > /root/score; cat /root/score"


def active(client: SandboxClient, name: str) -> List[str]:
    return [s.id for s in client.list(labels={LABEL: name}).sandboxes if s.status in ACTIVE]


@pytest.fixture(scope="module")
def runner(client: SandboxClient) -> Iterator[EpisodeRunner]:
    with EpisodeRunner(client, ENV, name="py-rl", concurrency=2, labels={"suite": "python-sdk"}) as r:
        yield r
    assert active(client, "py-rl") == []


def test_a_throwing_policy_leaves_no_sandbox(client: SandboxClient, runner: EpisodeRunner) -> None:
    seen: List[str] = []

    def boom(ep: Episode) -> None:
        seen.append(ep.sandbox_id)
        ep.run(add(1))
        raise ValueError("policy bug")

    with pytest.raises(ValueError, match="policy bug"):
        runner.run_episode(boom)
    assert client.get(seen[0]).status == SandboxStatus.TERMINATED
    results = runner.run(lambda ep: ep.run(add(2)) if ep.id.endswith("-0") else boom(ep), 2)
    assert results[0].error is None and results[0].reward == 2.0
    assert isinstance(results[1].error, ValueError) and results[1].reward is None
    assert active(client, "py-rl") == []


def test_trajectory_jsonl_and_replay_of_the_last_steps_give_the_same_outputs(runner: EpisodeRunner) -> None:
    with runner.episode() as ep:
        ep.write_file("/root/note", "from the policy\n")
        ep.run(add(2))
        ep.checkpoint()
        ep.run(add(5))
        ep.run("cat /root/note; date +%Y >/dev/null; ls /root")
        assert ep.score() == 7.0
    tr = Trajectory.from_jsonl(ep.trajectory.to_jsonl())
    assert [e.type for e in tr.events] == ["fork", "file_write", "command", "checkpoint", "command", "command", "verify"]
    line = json.loads(ep.trajectory.to_jsonl().splitlines()[2])
    assert line["exit_code"] == 0 and len(line["stdout_sha256"]) == 64 and line["ended_at"] >= line["started_at"]

    near = replay(runner, tr, last_k=2)  # from the checkpoint taken inside the episode
    assert near.checkpoint_id == tr.events[3].checkpoint_id
    assert [e.command for e in near.replayed] == [add(5), "cat /root/note; date +%Y >/dev/null; ls /root"]
    assert near.matches
    far = replay(runner, tr, last_k=3)  # before the checkpoint: from the episode's start state
    assert far.checkpoint_id == runner.checkpoint_id
    assert far.matches and len(far.replayed) == 3


def test_best_of_n_keeps_the_best_branch(client: SandboxClient, runner: EpisodeRunner) -> None:
    with runner.episode() as ep:
        ep.run(add(1))
        result = best_of_n(runner, ep, [add(1), add(4)])
        assert [b.reward for b in result.branches] == [2.0, 5.0]
        assert result.best.action == add(4)
        # The decision point itself is untouched by its branches.
        assert ep.score() == 1.0
    assert [e.type for e in result.best.episode.trajectory.events][-3:] == ["fork", "command", "verify"]
    assert active(client, "py-rl") == []


def test_tree_search_expands_the_best_nodes_level_by_level(client: SandboxClient, runner: EpisodeRunner) -> None:
    tree = tree_search(runner, lambda node: [add(1), add(3)], depth=2, width=1)
    assert [len(tree.level(d)) for d in range(3)] == [1, 2, 2]
    assert sorted(n.reward for n in tree.level(1)) == [1.0, 3.0]
    best1 = max(tree.level(1), key=lambda n: n.reward or 0)
    assert {n.parent for n in tree.level(2)} == {best1.id}
    assert sorted(n.reward for n in tree.level(2)) == [4.0, 6.0]
    assert (tree.best.reward, tree.best.path) == (6.0, [add(3), add(3)])
    assert tree.level(0)[0].checkpoint_id and best1.checkpoint_id
    assert active(client, "py-rl") == []


def test_reset_mode_reuses_one_sandbox_reset_in_place(client: SandboxClient) -> None:
    with EpisodeRunner(client, ENV, name="py-rl-reset", mode="reset", concurrency=1, labels={"suite": "python-sdk"}) as r:
        results = r.run(lambda ep: ep.run(add(3)), 2)
        assert [x.reward for x in results] == [3.0, 3.0]
        assert [x.trajectory.events[0].type for x in results] == ["reset", "reset"]
        assert results[0].trajectory.events[0].sandbox_id == results[1].trajectory.events[0].sandbox_id
    assert active(client, "py-rl-reset") == []


def test_a_killed_runner_is_swept_by_the_next_one(server: Server, client: SandboxClient) -> None:
    worker = Path(__file__).with_name("rl_worker.py")
    proc = subprocess.Popen([sys.executable, str(worker), server.url, server.key, "py-rl-killed"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("episode "), line
        orphan = line.split()[1]
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert client.get(orphan).status == SandboxStatus.RUNNING  # nobody cleaned up after SIGKILL
    with EpisodeRunner(client, ENV, name="py-rl-killed") as r:
        assert client.get(orphan).status == SandboxStatus.TERMINATED  # the start sweep
        assert r.checkpoint_id is not None
    assert active(client, "py-rl-killed") == []


def test_pacing_under_a_low_quota_lets_no_429_reach_the_caller(server: Server) -> None:
    admin = {"authorization": f"Bearer {server.key}"}
    with httpx.Client(base_url=server.url, headers=admin) as http:
        http.post("/v1/teams", json={"name": "py-rl-quota"}).raise_for_status()
        limits = {"max_active_sandboxes": 2, "max_creations_per_10s": 2}
        http.put("/v1/teams/py-rl-quota/limits", json=limits).raise_for_status()
        key = http.post("/v1/keys", json={"team": "py-rl-quota"}).json()["key"]
    # No retries in the client: whatever 429 the runner did not absorb would be raised.
    with SandboxClient(api_key=key, base_url=server.url, max_retries=0) as c:
        with EpisodeRunner(c, ENV, name="py-rl-quota", concurrency=3, creations_per_10s=2) as r:
            results = r.run(lambda ep: ep.run(add(1)), 3)
            assert [(x.error, x.reward) for x in results] == [(None, 1.0)] * 3
        assert active(c, "py-rl-quota") == []
