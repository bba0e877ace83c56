"""A training worker as the no-orphans test runs it: `create` with a key and labels it chose
itself and a hard lifetime, then work (the test SIGKILLs it first); `--sweep` is the same worker
restarted, deleting whatever a previous run of it owned, found by its label."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sandtree import CreateSandboxRequest, SandboxClient  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--timeout-minutes", type=float, default=30)
    p.add_argument("--sweep", action="store_true")
    a = p.parse_args()
    labels = {"suite": "python-sdk", "worker": a.worker}
    with SandboxClient(api_key=a.key, base_url=a.url) as client:
        if a.sweep:
            print(f"swept {len(client.bulk_delete(labels=labels).deleted)}", flush=True)
            return
        request = CreateSandboxRequest(
            docker_image="sandtree/busybox",
            memory_gb=0.25,
            labels=labels,
            timeout_minutes=a.timeout_minutes,
            idempotency_key=f"{a.worker}-{uuid.uuid4()}",
        )
        print("creating", flush=True)
        sb = client.create(request)
        print(f"created {sb.id}", flush=True)
        client.wait_for_creation(sb.id)
        time.sleep(3600)


if __name__ == "__main__":
    main()
