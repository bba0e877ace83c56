"""The Prime side of bench/prime.mjs: the real prime_sandboxes client, timed inside Python
(interpreter start left out). Usage: prime_bench.py IMAGE RUNS EXECS; prints one JSON object."""

import json
import sys
import time

from prime_sandboxes import APIClient, CreateSandboxRequest, SandboxClient


def main(image: str, runs: int, execs: int) -> dict:
    c = SandboxClient(APIClient())
    as_client, polled, connect_true, gateway_read = [], [], [], []
    for i in range(runs):
        # As the client does it: create, wait_for_creation (its own polling), first command.
        t0 = time.perf_counter()
        sb = c.create(CreateSandboxRequest(name=f"bench-{i}", docker_image=image, memory_gb=0.5, disk_size_gb=2))
        c.wait_for_creation(sb.id, max_attempts=300)
        assert c.execute_command(sb.id, "echo ready").stdout == "ready\n"
        as_client.append(time.perf_counter() - t0)
        c.delete(sb.id)
        # The same path polled every 20 ms (as the native bench polls), to the first output.
        t0 = time.perf_counter()
        sb = c.create(CreateSandboxRequest(name=f"bench-p{i}", docker_image=image, memory_gb=0.5, disk_size_gb=2))
        while c.get(sb.id).status != "RUNNING":
            time.sleep(0.02)
        assert c.execute_command(sb.id, "echo ready").stdout == "ready\n"
        polled.append(time.perf_counter() - t0)
        if i < runs - 1:
            c.delete(sb.id)
    c.upload_bytes(sb.id, "/tmp/one.txt", b"1", filename="one.txt")
    for _ in range(execs):
        t = time.perf_counter()
        c.execute_command(sb.id, "true")
        connect_true.append(time.perf_counter() - t)
        t = time.perf_counter()
        c.read_file(sb.id, "/tmp/one.txt")
        gateway_read.append(time.perf_counter() - t)
    c.delete(sb.id)
    ms = lambda xs: [x * 1000 for x in xs]
    return {
        "create_to_first_output_wait_for_creation_ms": ms(as_client),
        "create_to_first_output_polled_ms": ms(polled),
        "connect_exec_true_ms": ms(connect_true),
        "rest_gateway_read_file_ms": ms(gateway_read),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
