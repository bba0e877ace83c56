"""Steps of prime-client.test.ts, each run as `python prime_steps.py STEP JSON_ARGS`.

Each drives the real `prime_sandboxes` client, configured only by PRIME_API_BASE_URL and
PRIME_API_KEY, and prints what it saw as one JSON object on its last line.
"""

import asyncio
import hashlib
import json
import os
import sys
import tempfile
import time

from prime_sandboxes import (
    APIClient,
    APIError,
    AsyncSandboxClient,
    CommandTimeoutError,
    CreateSandboxRequest,
    SandboxClient,
)
from prime_sandboxes.exceptions import SandboxFileNotFoundError


def client() -> SandboxClient:
    return SandboxClient(APIClient())


def create(args):
    c = client()
    req = CreateSandboxRequest(
        name=args["name"],
        docker_image=args["image"],
        start_command=args.get("start_command"),
        cpu_cores=1,
        memory_gb=args.get("memory_gb", 0.5),
        disk_size_gb=args.get("disk_size_gb", 2),
        timeout_minutes=args.get("timeout_minutes", -1),
        idle_timeout_minutes=args.get("idle_timeout_minutes"),
        environment_vars=args.get("environment_vars"),
        secrets=args.get("secrets"),
        labels=args.get("labels", []),
        idempotency_key=args.get("idempotency_key"),
    )
    t0 = time.monotonic()
    sb = c.create(req)
    # The create answer's gatewayAuth seeds the client's auth cache (no POST /auth before the first command).
    seeded = sb.id in c._auth_cache._auth_cache
    again = c.create(req) if args.get("idempotency_key") else None
    if args.get("wait", True):
        c.wait_for_creation(sb.id, max_attempts=args.get("max_attempts", 180))
    got = c.get(sb.id)
    return {
        "created": sb.model_dump(mode="json"),
        "replayed_id": again.id if again else None,
        "auth_seeded": seeded,
        "got": got.model_dump(mode="json"),
        "seconds": time.monotonic() - t0,
    }


def exec_(args):
    c = client()
    sid = args["id"]
    r = c.execute_command(sid, "echo out; echo err >&2; echo $GREETING $SECRET_TOKEN; pwd; exit 3", env={"GREETING": "hi"}, working_dir="/tmp")
    user = c.execute_command(sid, "id -un", user="nobody")
    timed_out = None
    t0 = time.monotonic()
    try:
        c.execute_command(sid, "sleep 30", timeout=2)
    except CommandTimeoutError as e:
        timed_out = str(e)
    elapsed = time.monotonic() - t0
    after = c.execute_command(sid, "ps -eo args | grep -c '^sleep 30' || true")
    start_ran = c.execute_command(sid, "cat /tmp/start-ran; echo $FROM_CREATE").stdout
    return {
        "stdout": r.stdout,
        "stderr": r.stderr,
        "exit_code": r.exit_code,
        "user": user.stdout.strip(),
        "timeout_error": timed_out,
        "timeout_elapsed": elapsed,
        "sleeps_left": after.stdout.strip(),
        "start_ran": start_ran,
    }


def files(args):
    c = client()
    sid = args["id"]
    size = args["mib"] * 1024 * 1024
    work = tempfile.mkdtemp()
    src = os.path.join(work, "big.bin")
    with open(src, "wb") as f:
        for _ in range(args["mib"]):
            f.write(os.urandom(1024 * 1024))
    want = hashlib.sha256(open(src, "rb").read()).hexdigest()
    up = c.upload_file(sid, "/data/deep/big.bin", src)
    inside = c.execute_command(sid, "sha256sum /data/deep/big.bin").stdout.split()[0]
    dst = os.path.join(work, "back.bin")
    c.download_file(sid, "/data/deep/big.bin", dst)
    back = hashlib.sha256(open(dst, "rb").read()).hexdigest()
    c.upload_bytes(sid, "/tmp/text.txt", b"0123456789abcdefghij", filename="text.txt")
    whole = c.read_file(sid, "/tmp/text.txt")
    window = c.read_file(sid, "/tmp/text.txt", offset=5, length=4)
    tail = c.read_file(sid, "/tmp/text.txt", offset=-6)
    missing = None
    try:
        c.read_file(sid, "/tmp/nope.txt")
    except SandboxFileNotFoundError as e:
        missing = type(e).__name__
    return {
        "size": size,
        "uploaded": up.model_dump(mode="json"),
        "sha_local": want,
        "sha_inside": inside,
        "sha_back": back,
        "whole": whole.model_dump(mode="json"),
        "window": window.model_dump(mode="json"),
        "tail": tail.model_dump(mode="json"),
        "missing": missing,
    }


def jobs(args):
    c = client()
    sid = args["id"]
    quick = c.start_background_job(sid, "echo done-out; echo done-err >&2; exit 7")
    slow = c.start_background_job(sid, "sleep 4; echo slow", working_dir="/tmp", env={"X": "1"})
    first = [s.model_dump(mode="json") for s in c.get_background_job_statuses([quick, slow])]
    deadline = time.monotonic() + 120
    while True:
        st = c.get_background_job(sid, slow)
        if st.completed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    q = c.get_background_job(sid, quick)
    ran = c.run_background_job(sid, "echo ran", timeout=120, poll_interval=1)
    return {
        "first": first,
        "quick": q.model_dump(mode="json"),
        "slow": st.model_dump(mode="json"),
        "ran": ran.model_dump(mode="json"),
        "batch_supported": c._background_job_status_batch_supported,
    }


def listing(args):
    c = client()
    label = args["label"]
    ids = [c.create(CreateSandboxRequest(name=f"lst-{i}", docker_image=args["image"], memory_gb=0.25, disk_size_gb=1, labels=[label, f"n={i}"])).id for i in range(3)]
    statuses = c.get_sandbox_statuses(ids)
    page1 = c.list(labels=[label], per_page=2, page=1)
    page2 = c.list(labels=[label], per_page=2, page=2)
    one = c.list(labels=[label, "n=1"])
    by_ids = c.bulk_delete(sandbox_ids=[ids[0], "sb-doesnotexist0000"])
    by_labels = c.bulk_delete(labels=[label])
    left = c.list(labels=[label], exclude_terminated=True)
    return {
        "ids": ids,
        "statuses": statuses.model_dump(mode="json"),
        "page1": [s.id for s in page1.sandboxes],
        "page2": [s.id for s in page2.sandboxes],
        "total": page1.total,
        "has_next": [page1.has_next, page2.has_next],
        "one": [s.id for s in one.sandboxes],
        "one_labels": one.sandboxes[0].labels if one.sandboxes else None,
        "by_ids": by_ids.model_dump(mode="json"),
        "by_labels": by_labels.model_dump(mode="json"),
        "left": left.total,
    }


def foreign(args):
    c = client()
    out = {}
    for name, call in {
        "get": lambda: c.get(args["id"]),
        "exec": lambda: c.execute_command(args["id"], "true"),
        "delete": lambda: c.delete(args["id"]),
    }.items():
        try:
            call()
            out[name] = None
        except APIError as e:
            out[name] = f"{type(e).__name__}: {e}"
    return out


def logs(args):
    c = client()
    ctx = c._get_sandbox_error_context(args["id"])
    return {"logs": c.get_logs(args["id"]), "context": ctx}


async def session(args):
    sid = args["id"]
    async with AsyncSandboxClient() as c:
        r = await c.execute_command(sid, "echo async; exit 4")
        p = await c.open_process(sid, "echo ready; read a; echo got:$a; read b; echo got:$b >&2; sleep 300")
        out = []
        it = p.stdout.__aiter__()
        out.append((await it.__anext__()).decode())
        await p.write_stdin(b"first\n")
        out.append((await it.__anext__()).decode())
        await p.write_stdin(b"second\n")
        err = (await p.stderr.__anext__()).decode()
        await p.terminate()
        code = await asyncio.wait_for(p.wait(), 60)
        # A live process that ignores SIGTERM is killed.
        q = await c.open_process(sid, "trap '' TERM; echo armed; sleep 300")
        armed = (await q.stdout.__anext__()).decode()
        await q.terminate()
        await asyncio.sleep(1)
        still = q.returncode
        await q.kill()
        killed = await asyncio.wait_for(q.wait(), 60)
        await p.aclose()
        await q.aclose()
        return {
            "exec": r.model_dump(mode="json"),
            "pid": p.pid,
            "stdout": out,
            "stderr": err,
            "terminated": code,
            "armed": armed,
            "after_term": still,
            "killed": killed,
        }


def checkpoints(args):
    c = client()
    sid = args["id"]
    c.execute_command(sid, "echo kept > /root/marker")
    ck = c.checkpoint(sid)
    first_state = ck.state
    durable = c.wait_for_checkpoint(ck.id, timeout_seconds=300)
    listed = c.list_checkpoints(sid)
    got = c.get_checkpoint(ck.id)
    batch = c.get_checkpoints([ck.id, "ck-00000000000000000000"])
    child = c.create(CreateSandboxRequest(name="restored", checkpoint_id=ck.id, memory_gb=0.5))
    c.wait_for_creation(child.id, max_attempts=180)
    marker = c.execute_command(child.id, "cat /root/marker").stdout
    c.delete(child.id)
    return {
        "first_state": first_state,
        "durable": durable.model_dump(mode="json"),
        "listed": [x.id for x in listed],
        "got_state": got.state,
        "batch_found": [x.id for x in batch.checkpoints],
        "batch_errors": [e.code for e in batch.errors],
        "child_image": child.docker_image,
        "marker": marker,
    }


def refusals(args):
    c = client()
    out = {}
    for name, fields in {
        "gpu": {"gpu_count": 1, "gpu_type": "H100"},
        "region": {"region": "us-east"},
        "fractional_cpu": {"cpu_cores": 0.5},
        "team": {"team_id": "someone-else"},
    }.items():
        try:
            c.create(CreateSandboxRequest(name="refused", docker_image=args["image"], **fields))
            out[name] = None
        except APIError as e:
            out[name] = str(e)
    return out


PROBE = "import sys, urllib.request\ntry:\n    print('OK ' + urllib.request.urlopen(sys.argv[1], timeout=4).read().decode())\nexcept Exception as e:\n    print('ERR ' + type(e).__name__)"


def egress(args):
    c = client()
    sb = c.create(CreateSandboxRequest(name="egress", docker_image=args["image"], memory_gb=0.5, disk_size_gb=2, network_allowlist=["allowed.test"]))
    c.wait_for_creation(sb.id, max_attempts=180)

    def probe(url):
        return c.execute_command(sb.id, f"python3 -c \"$P\" {url}", env={"P": PROBE}).stdout.strip()

    out = {"created": c.get(sb.id).network_allowlist, "initial": c.get_network(sb.id).model_dump(mode="json")}
    out["initial_probes"] = [probe("http://allowed.test/"), probe("http://other.test/")]
    out["allow_other"] = c.set_network(sb.id, allow=["other.test"]).model_dump(mode="json")
    out["allow_other_probes"] = [probe("http://allowed.test/"), probe("http://other.test/")]
    out["deny_all"] = c.set_network(sb.id, deny=["*"]).model_dump(mode="json")
    out["deny_all_probes"] = [probe("http://other.test/")]
    out["allow_all"] = c.set_network(sb.id, allow=["*"]).model_dump(mode="json")
    out["allow_all_probes"] = [probe("http://allowed.test/"), probe("http://denied.test/")]
    out["deny_one"] = c.set_network(sb.id, deny=["denied.test"]).model_dump(mode="json")
    out["deny_one_probes"] = [probe("http://allowed.test/"), probe("http://denied.test/")]
    c.delete(sb.id)
    return out


def delete(args):
    return client().delete(args["id"])


STEPS = {
    "create": create,
    "exec": exec_,
    "files": files,
    "jobs": jobs,
    "listing": listing,
    "foreign": foreign,
    "logs": logs,
    "session": lambda a: asyncio.run(session(a)),
    "checkpoints": checkpoints,
    "refusals": refusals,
    "egress": egress,
    "delete": delete,
}

if __name__ == "__main__":
    result = STEPS[sys.argv[1]](json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
    print(json.dumps(result, default=str))
