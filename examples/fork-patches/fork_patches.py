"""Eight candidate patches for a bug, each tried in a fork of one set-up sandbox.

The repository in repo/ has a bug in calc/stats.py and unit tests; its setup (repo/setup.sh)
is slow. The setup runs once; a scripted policy then writes each candidate fix in its own fork
of that state, the verifier (repo/score.py) runs the tests, and the fraction passed is the
branch's reward. Prints each branch's reward, the best patch and the time saved against running
the setup once per attempt. `--json` prints one JSON object instead.

Run with a server up (`sandtree serve`): python3 examples/fork-patches/fork_patches.py
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "clients" / "python" / "src"))  # the SDK of this checkout

from sandtree import SandboxClient  # noqa: E402
from sandtree.rl import Environment, Episode, EpisodeRunner  # noqa: E402

REPO = "/root/repo"
STATS = (HERE / "repo" / "calc" / "stats.py").read_text()
BUGGY = "sum(xs) / (len(xs) + 1)"


def copy_repo() -> list:
    """Setup commands that write repo/ into the sandbox (files as base64, no tar needed)."""
    cmds = []
    for f in sorted((HERE / "repo").rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            dest = f"{REPO}/{f.relative_to(HERE / 'repo').as_posix()}"
            b64 = base64.b64encode(f.read_bytes()).decode()
            cmds.append(f"mkdir -p $(dirname {dest}) && echo {b64} | base64 -d > {dest}")
    return cmds


def main() -> None:
    as_json = "--json" in sys.argv
    candidates = json.loads((HERE / "candidates.json").read_text())
    setup = [*copy_repo(), f"sh {REPO}/setup.sh"]
    env = Environment(
        image="sandtree/debian", setup=setup, verifier=f"cd {REPO} && python3 score.py",
        memory_gb=0.5, timeout_minutes=30, env={"SETUP_EXTRA_SECONDS": os.environ.get("SETUP_EXTRA_SECONDS", "4")},
    )

    def policy(ep: Episode) -> str:
        patch = candidates[int(ep.id.rsplit("-", 1)[1])]
        ep.write_file(f"{REPO}/calc/stats.py", STATS.replace(BUGGY, patch))
        return patch

    with SandboxClient() as client:
        t0 = time.monotonic()
        with EpisodeRunner(client, env, name="example-fork-patches", concurrency=4) as runner:
            setup_s = time.monotonic() - t0
            t1 = time.monotonic()
            results = runner.run(policy, len(candidates))
            episodes_s = time.monotonic() - t1
    failed = [r for r in results if r.error is not None]
    if failed:
        raise SystemExit(f"{len(failed)} episode(s) failed: {failed[0].error!r}")
    best = max(results, key=lambda r: r.reward or 0.0)
    report = {
        "branches": [{"patch": r.value, "reward": r.reward} for r in results],
        "best": {"patch": best.value, "reward": best.reward},
        "setup_seconds": round(setup_s, 2),
        "episodes_seconds": round(episodes_s, 2),
        # Setup per attempt (boot, setup, save) would be paid once more for every attempt after the first.
        "saved_seconds": round(setup_s * (len(results) - 1), 2),
    }
    if as_json:
        print(json.dumps(report))
        return
    for i, b in enumerate(report["branches"]):
        print(f"branch {i}: reward {b['reward']:.3f}  mean = {b['patch']}")
    print(f"best patch: return {best.value}  (reward {best.reward:.3f})")
    print(
        f"setup once {report['setup_seconds']} s, {len(results)} forked episodes {report['episodes_seconds']} s; "
        f"running the setup per attempt would have taken {report['saved_seconds']} s more"
    )


if __name__ == "__main__":
    main()
