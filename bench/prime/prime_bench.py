"""The Prime side of bench/prime.mjs: the real prime_sandboxes client, timed inside Python
(interpreter start left out). Usage: prime_bench.py create IMAGE | prime_bench.py exec IMAGE N; prints one JSON object."""

import json
import sys
import time

from prime_sandboxes import APIClient, CreateSandboxRequest, SandboxClient


def creates(c: SandboxClient, image: str) -> dict:
    """One create to first output as the client does it (wait_for_creation), one polled every 20 ms."""
    t0 = time.perf_counter()
    sb = c.create(CreateSandboxRequest(name="bench-a", docker_image=image, memory_gb=0.5, disk_size_gb=2))
    c.wait_for_creation(sb.id, max_attempts=300)
    assert c.execute_command(sb.id, "echo ready").stdout == "ready\n"
    as_client = time.perf_counter() - t0
    c.delete(sb.id)
    t0 = time.perf_counter()
    sb = c.create(CreateSandboxRequest(name="bench-b", docker_image=image, memory_gb=0.5, disk_size_gb=2))
    while c.get(sb.id).status != "RUNNING":
        time.sleep(0.02)
    assert c.execute_command(sb.id, "echo ready").stdout == "ready\n"
    polled = time.perf_counter() - t0
    c.delete(sb.id)
    return {"wait_for_creation_ms": as_client * 1000, "polled_ms": polled * 1000}


def execs(c: SandboxClient, image: str, n: int) -> dict:
    sb = c.create(CreateSandboxRequest(name="bench-x", docker_image=image, memory_gb=0.5, disk_size_gb=2))
    c.wait_for_creation(sb.id, max_attempts=300)
    c.upload_bytes(sb.id, "/tmp/one.txt", b"1", filename="one.txt")
    connect_true, gateway_read = [], []
    for _ in range(n):
        t = time.perf_counter()
        c.execute_command(sb.id, "true")
        connect_true.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        c.read_file(sb.id, "/tmp/one.txt")
        gateway_read.append((time.perf_counter() - t) * 1000)
    c.delete(sb.id)
    return {"connect_exec_true_ms": connect_true, "rest_gateway_read_file_ms": gateway_read}


if __name__ == "__main__":
    client = SandboxClient(APIClient())
    if sys.argv[1] == "create":
        print(json.dumps(creates(client, sys.argv[2])))
    else:
        print(json.dumps(execs(client, sys.argv[2], int(sys.argv[3]))))
