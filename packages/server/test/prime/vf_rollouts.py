"""Rollouts of a fixed policy on verifiers' own Prime runtime (verifiers.v1, unpatched).

Each rollout starts a sandbox the way verifiers does (PrimeRuntime.start: create, wait_for_creation,
mkdir of the workdir), writes a task, runs the policy's commands (background jobs polled as
verifiers polls them), streams a live process, reads the answer back, scores it and tears the
sandbox down. The "model" is a fixed policy: no network, no weights. Prints one JSON object.
"""

import asyncio
import json
import sys

from verifiers.v1.runtimes import provision_runtime
from verifiers.v1.runtimes.prime import PrimeConfig


def policy(task: str) -> list[list[str]]:
    """The fixed policy: the commands it answers a task with."""
    a, b = task.split("+")
    return [["sh", "-c", f"echo $(( {int(a)} + {int(b)} )) > answer.txt"], ["cat", "answer.txt"]]


async def rollout(i: int, image: str) -> dict:
    # An empty image: verifiers' default (python:3.11-slim).
    config = PrimeConfig(**({"image": image} if image else {}), cpu=1, memory=0.5, disk=2, idle_timeout=600, labels=["vf-test"])
    async with provision_runtime(config, name=f"vf-rollout-{i}") as runtime:
        task = f"{i}+{i * 10}"
        await runtime.write("task.txt", task.encode())
        seen = (await runtime.read("task.txt")).decode()
        outputs = []
        for argv in policy(seen):
            r = await runtime.run(argv, {"ROLLOUT": str(i)})
            outputs.append({"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
        proc = await runtime.open_process(["sh", "-c", "read x; echo live:$x"], {})
        await proc.write(b"hello\n")
        live = b""
        async for chunk in proc.stdout:
            live += chunk
        code = await proc.wait()
        answer = (await runtime.read("answer.txt")).decode().strip()
        reward = 1.0 if answer == str(i + i * 10) else 0.0
        return {"id": runtime.info.id, "image": runtime.config.image, "task": seen, "outputs": outputs, "live": live.decode(), "live_exit": code, "reward": reward}


async def main(image: str, n: int) -> dict:
    results = await asyncio.gather(*(rollout(i, image) for i in range(1, n + 1)))
    return {"rollouts": results}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], int(sys.argv[2]))), default=str))
