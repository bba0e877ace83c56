#!/usr/bin/env python3
"""Kernel fidelity suite: runs INSIDE a sandtree/docker sandbox, as root.

Each check prints one JSON line {"check", "ok", "seconds", "detail", "means"}; a last line
{"summary": ...} counts them. Exit status 0 only when every check passed.

  suite.py start-service        start a `nohup ... &` HTTP service and return (run it in one
                                exec; the `nohup-service` check, in a later exec, asks it)
  suite.py run [--tar PATH] [--only a,b]

The Docker checks load PATH (a docker-archive of sandtree/hello, a busybox image whose httpd
serves /www) with `docker load`: no registry is needed.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.request

WORK = "/tmp/fidelity"
SERVICE_PORT = 8099
CHECKS = []
CHILDREN = []  # helper processes a check started, ended after the run


def check(name, means):
    def add(fn):
        CHECKS.append((name, means, fn))
        return fn
    return add


def sh(cmd, timeout=120, ok=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if ok and r.returncode != 0:
        raise RuntimeError(f"`{cmd}` exited {r.returncode}: {(r.stdout + r.stderr).strip()[-400:]}")
    return r


def expect(cond, what):
    if not cond:
        raise RuntimeError(what)


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def poll(fn, seconds, what):
    end, err = time.monotonic() + seconds, None
    while time.monotonic() < end:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            err = e
            time.sleep(0.3)
    raise RuntimeError(f"{what} within {seconds}s: {err}")


def layered_dirs(lower_text):
    """A fresh directory holding l (the lower layer, with a file f of `lower_text`), u, w and m."""
    d = tempfile.mkdtemp(dir=WORK)
    for p in ("l", "u", "w", "m"):
        os.mkdir(f"{d}/{p}")
    open(f"{d}/l/f", "w").write(lower_text)
    return d


@check("overlayfs", "overlay mounts work (the overlay module autoloads): union filesystems, Docker's overlay2, build tools")
def overlayfs():
    d = layered_dirs("lower\n")
    sh(f"mount -t overlay overlay -o lowerdir={d}/l,upperdir={d}/u,workdir={d}/w {d}/m")
    try:
        open(f"{d}/m/f", "a").write("upper\n")
        expect(open(f"{d}/u/f").read() == "lower\nupper\n", "the write did not reach the upper dir")
        expect(open(f"{d}/l/f").read() == "lower\n", "the lower dir changed")
    finally:
        sh(f"umount {d}/m", ok=False)
    return "copy-up to the upper dir, lower untouched"


def netns_up():
    sh("ip netns del fid 2>/dev/null; ip link del fidA 2>/dev/null", ok=False)
    sh("ip netns add fid && ip link add fidA type veth peer name fidB && ip link set fidB netns fid")
    sh("ip addr add 10.77.0.1/30 dev fidA && ip link set fidA up")
    sh("ip -n fid addr add 10.77.0.2/30 dev fidB && ip -n fid link set fidB up && ip -n fid link set lo up")
    srv = "import socket,sys,threading\n" \
        "def serve(p):\n" \
        " s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('10.77.0.2',p)); s.listen()\n" \
        " while True:\n" \
        "  c,_=s.accept(); c.sendall(b'pong %d\\n'%p); c.close()\n" \
        "[threading.Thread(target=serve,args=(p,)).start() for p in (7000,7001)]\n"
    CHILDREN.append(subprocess.Popen(["ip", "netns", "exec", "fid", "python3", "-c", srv],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


def tcp_ask(port, timeout=3):
    with socket.create_connection(("10.77.0.2", port), timeout=timeout) as s:
        return s.recv(64).decode()


@check("netns-veth", "network namespaces and veth pairs pass traffic: container networking, network test rigs")
def netns_veth():
    netns_up()
    got = poll(lambda: tcp_ask(7000), 30, "no answer across the veth pair")
    expect(got == "pong 7000\n", f"unexpected answer {got!r}")
    return "TCP 10.77.0.1 -> 10.77.0.2:7000 in namespace fid answered"


@check("nftables", "nftables rules take effect: firewalls, NAT and Docker's iptables-nft rules behave as on a host")
def nftables():
    expect(tcp_ask(7001) == "pong 7001\n", "port 7001 did not answer before the rule")
    sh("ip netns exec fid nft add table inet fid && "
       "ip netns exec fid nft 'add chain inet fid input { type filter hook input priority 0; }' && "
       "ip netns exec fid nft add rule inet fid input tcp dport 7001 counter reject with tcp reset")
    try:
        tcp_ask(7001)
        raise RuntimeError("port 7001 still answered with the reject rule in place")
    except ConnectionRefusedError:
        pass
    expect(tcp_ask(7000) == "pong 7000\n", "port 7000 stopped answering")
    rules = sh("ip netns exec fid nft list chain inet fid input").stdout
    expect("packets 0 " not in rules and "packets" in rules, f"the rule's counter did not move: {rules}")
    return "tcp dport 7001 reset, 7000 still open, counter moved"


@check("cgroup-oom", "a cgroup v2 memory.max is enforced: the child over it is OOM-killed, the sandbox lives on")
def cgroup_oom():
    cg = "/sys/fs/cgroup/fidelity-oom"
    if os.path.isdir(cg):
        os.rmdir(cg)
    os.mkdir(cg)
    open(f"{cg}/memory.max", "w").write("16M")
    r = sh(f"sh -c 'echo $$ > {cg}/cgroup.procs && exec python3 -c \"b = bytearray(96 << 20)\"'", ok=False)
    expect(r.returncode == 137, f"the child exited {r.returncode}, not 137 (SIGKILL)")
    events = open(f"{cg}/memory.events").read()
    kills = int(events.split("oom_kill ")[1].split()[0])
    expect(kills >= 1, f"no oom_kill in memory.events: {events}")
    os.rmdir(cg)
    return f"exit 137, oom_kill {kills}"


@check("userns", "unprivileged-style user namespaces: rootless tools (podman, bubblewrap, buildah) can map root")
def userns():
    out = sh("unshare --user --map-root-user id -u").stdout.strip()
    expect(out == "0", f"id -u in the namespace printed {out!r}")
    return "uid 0 inside the namespace"


@check("fuse", "FUSE mounts work (/dev/fuse, fuse3): sshfs, rclone, fuse-overlayfs and other userspace filesystems")
def fuse():
    d = layered_dirs("through fuse\n")
    sh(f"fuse-overlayfs -o lowerdir={d}/l,upperdir={d}/u,workdir={d}/w {d}/m")
    try:
        mounts = open("/proc/mounts").read()
        expect(f" {d}/m fuse" in mounts, f"{d}/m is not a FUSE mount")
        expect(open(f"{d}/m/f").read() == "through fuse\n", "the file read through FUSE differs")
        open(f"{d}/m/g", "w").write("written\n")
        expect(open(f"{d}/u/g").read() == "written\n", "a write through FUSE did not land")
    finally:
        sh(f"fusermount3 -u {d}/m", ok=False)
    return "fuse-overlayfs read and write"


@check("dockerd", "the image's start command brings Docker's engine up (dockerd, containerd, runc)")
def dockerd():
    sh("start-dockerd", timeout=660)
    return sh("docker info --format '{{.ServerVersion}} {{.Driver}} cgroup v{{.CgroupVersion}}'").stdout.strip()


@check("docker-load", "`docker load` of an image tarball: images arrive without any registry")
def docker_load(tar):
    out = sh(f"docker load -i {tar}", timeout=300).stdout
    expect("sandtree/hello:latest" in out, f"docker load printed {out!r}")
    return out.strip()


@check("docker-run", "`docker run --rm` runs a container and prints its output")
def docker_run():
    out = sh("docker run --rm sandtree/hello echo hello from a container", timeout=300).stdout
    expect(out == "hello from a container\n", f"printed {out!r}")
    return out.strip()


@check("docker-port", "`docker run -p` publishes a port that answers inside the VM (bridge, NAT, docker-proxy)")
def docker_port():
    sh("docker rm -f fid-web", ok=False)
    sh("docker run -d --name fid-web -p 8080:80 sandtree/hello httpd -f -p 80 -h /www", timeout=300)
    try:
        body = poll(lambda: http_get("http://127.0.0.1:8080/"), 60, "no answer on the published port")
        expect(body == "hello from sandtree/hello\n", f"answered {body!r}")
    finally:
        sh("docker rm -f fid-web", ok=False)
    return "127.0.0.1:8080 -> container :80 answered"


@check("docker-build", "`docker build` of a Dockerfile with a RUN step from a loaded image")
def docker_build():
    d = tempfile.mkdtemp(dir=WORK)
    open(f"{d}/Dockerfile", "w").write("FROM sandtree/hello\nRUN echo built inside > /built.txt\n")
    sh(f"docker build -q -t fid-built {d}", timeout=300)
    out = sh("docker run --rm fid-built cat /built.txt", timeout=300).stdout
    expect(out == "built inside\n", f"the built image holds {out!r}")
    return "fid-built:latest runs"


@check("nohup-service", "a `nohup ... &` service keeps answering after the exec that started it returned")
def nohup_service():
    started = f"{WORK}/service.started"
    expect(os.path.exists(started), "run `suite.py start-service` in an earlier exec first")
    body = poll(lambda: http_get(f"http://127.0.0.1:{SERVICE_PORT}/alive.txt"), 30, "the service did not answer")
    expect(body == "alive\n", f"answered {body!r}")
    return f"started {time.time() - os.path.getmtime(started):.1f}s earlier by another exec, still answering"


def start_service():
    os.makedirs(f"{WORK}/www", exist_ok=True)
    open(f"{WORK}/www/alive.txt", "w").write("alive\n")
    # The same line a user would type; this process exits right after.
    subprocess.run(f"cd {WORK}/www && nohup python3 -m http.server {SERVICE_PORT} >{WORK}/service.log 2>&1 &",
                   shell=True, check=True)
    open(f"{WORK}/service.started", "w").write(str(time.time()))
    print(json.dumps({"started": f"http://127.0.0.1:{SERVICE_PORT}/"}))


def run(args):
    tar = args[args.index("--tar") + 1] if "--tar" in args else "/tmp/hello-docker.tar"
    only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else None
    passed = failed = 0
    for name, means, fn in CHECKS:
        if only is not None and name not in only:
            continue
        t0 = time.monotonic()
        try:
            detail, ok = (fn(tar) if fn.__code__.co_argcount else fn()), True
        except Exception as e:  # noqa: BLE001 - every failure is reported by name
            detail, ok = f"{type(e).__name__}: {e}", False
        passed, failed = passed + ok, failed + (not ok)
        print(json.dumps({"check": name, "ok": ok, "seconds": round(time.monotonic() - t0, 3),
                          "detail": detail, "means": means}), flush=True)
    for p in CHILDREN:
        p.kill()
    sh("ip netns del fid", ok=False)
    print(json.dumps({"summary": {"passed": passed, "failed": failed, "kernel": os.uname().release}}), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    argv = sys.argv[1:]
    if argv[:1] == ["start-service"]:
        start_service()
    elif argv[:1] == ["run"]:
        sys.exit(run(argv[1:]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
