"""examples/fork-patches/fork_patches.py runs end to end against the suite's server: eight forks
of one set-up Debian sandbox, the correct patch found with every test passing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO, Server

EXAMPLE = REPO / "examples" / "fork-patches" / "fork_patches.py"


def test_the_fork_patches_example_finds_the_fix(server: Server) -> None:
    env = dict(os.environ, SANDTREE_API_URL=server.url, SANDTREE_API_KEY=server.key, SETUP_EXTRA_SECONDS="1")
    r = subprocess.run([sys.executable, str(EXAMPLE), "--json"], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    rewards = [b["reward"] for b in report["branches"]]
    assert len(rewards) == 8
    assert report["best"] == {"patch": "sum(xs) / len(xs)", "reward": 1.0}
    assert rewards[0] < 1.0  # the unpatched code fails some tests
    assert sorted(rewards).count(1.0) == 1
