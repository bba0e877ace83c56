"""An RL worker the runner-kill test SIGKILLs in the middle of an episode: prints the episode's
sandbox id, then hangs inside the policy."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sandtree import SandboxClient  # noqa: E402
from sandtree.rl import Environment, EpisodeRunner  # noqa: E402


def hang(ep: object) -> None:
    print(f"episode {ep.sandbox_id}", flush=True)  # type: ignore[attr-defined]
    time.sleep(3600)


if __name__ == "__main__":
    url, key, name = sys.argv[1:4]
    env = Environment(image="sandtree/busybox", setup=["echo 0 > /root/score"], verifier="cat /root/score")
    with SandboxClient(api_key=key, base_url=url) as client, EpisodeRunner(client, env, name=name) as runner:
        runner.run_episode(hang)
