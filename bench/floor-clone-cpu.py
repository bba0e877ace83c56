#!/usr/bin/env python3
"""What a bare copy-on-write clone costs, with no sandtree code in the path: the CPU time of each
clone's QEMU process until its first command answers, the cost of the first process a fresh
clone runs (fork + exec under TCG translates those kernel paths anew in every QEMU process), and
the same clone fired N at once (the floor of a burst of creates on this host).
Uses the functions of the team's raw-floor.py ($SANDTREE_FLOOR_SCRIPT, else
../shared/bench/raw-floor.py beside the project's root). Prints one JSON object.
With --idle N: N clones held at once, idle, each answering `/bin/true`; their CPU over --window
seconds and their PSS (the floor of bench/density.mjs).
  python3 bench/floor-clone-cpu.py [--clones 6] [--burst 64] [--cpu qemu64,+arat] [--idle N --window 30]"""
import argparse, importlib.util, json, os, signal, statistics, subprocess, sys, tempfile, time, types

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.environ.get("SANDTREE_FLOOR_SCRIPT") or os.path.join(HERE, "..", "..", "shared", "bench", "raw-floor.py")
spec = importlib.util.spec_from_file_location("raw_floor", SCRIPT)
rf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rf)
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def ask(s, line, marker):
    s.sendall(line.encode())
    b = b""
    while marker.encode() not in b:
        b += s.recv(4096)


CPU = []  # ["-cpu", MODEL] with --cpu, else QEMU's default model
STARTED = []  # every QEMU started, killed on the way out (a bench's Ctrl-C included)
# raw-floor.py's sockets and template RAM file have fixed names: two runs at once on one machine
# (other benches) would share the template's RAM file and corrupt each other's clones. This run
# keeps its sockets, state and RAM file to itself (the kernel and initramfs stay shared).
RAM = f"/dev/shm/floor-clone-{os.getpid()}.ram"


def _popen(args, *a, **k):
    return subprocess.Popen([x.replace("/dev/shm/raw-baseline.ram", RAM) for x in args], *a, **k)


def isolate():
    rf.WORK = tempfile.mkdtemp(prefix="floor-clone-")
    rf.subprocess = types.SimpleNamespace(Popen=_popen, run=subprocess.run)


def qemu(*a, **k):
    p = rf.qemu(*a, **k)
    STARTED.append(p)
    return p


def template(kern, initrd):
    p = qemu(kern, initrd, "t", CPU, share="on")
    s = rf.connect(f"{rf.WORK}/t.agent")
    rf.until(s, "UP", "echo UP\n")
    q = rf.qmp(f"{rf.WORK}/t.qmp")
    q("migrate-set-capabilities", {"capabilities": [{"capability": "x-ignore-shared", "state": True}]})
    q("stop")
    q("migrate", {"uri": f"exec:cat > {rf.WORK}/tpl.state"})
    rf.migrate_wait(q)
    q("quit")
    p.wait()


def clone_start(kern, initrd, tag):
    p = qemu(kern, initrd, tag, CPU + ["-incoming", "defer"], share="off")
    q = rf.qmp(f"{rf.WORK}/{tag}.qmp")
    q("migrate-set-capabilities", {"capabilities": [{"capability": "x-ignore-shared", "state": True}]})
    q("migrate-incoming", {"uri": f"exec:cat {rf.WORK}/tpl.state"})
    rf.migrate_wait(q)
    q("cont")
    return p


def one_by_one(kern, initrd, n):
    rows = []
    for i in range(n):
        t = time.time()
        p = clone_start(kern, initrd, f"k{i}")
        s = rf.connect(f"{rf.WORK}/k{i}.agent")
        rf.until(s, f"K{i}", f"echo K{i}\n")
        row = {"clone_to_echo_ms": (time.time() - t) * 1000, "clone_cpu_to_echo_ms": cpu_s(p.pid) * 1000}
        for k in ("first", "second"):
            c, t = cpu_s(p.pid), time.time()
            ask(s, f"/bin/true; echo {k}{i}\n", f"{k}{i}\n")
            row[f"{k}_true_ms"] = (time.time() - t) * 1000
            row[f"{k}_true_cpu_ms"] = (cpu_s(p.pid) - c) * 1000
        rows.append(row)
        p.kill()
        p.wait()
    return {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}


def burst(kern, initrd, n):
    """n clones started at once; each answers `echo` (a shell builtin: the agent's answer) and then
    runs one /bin/true (a process). CPU is summed over all n QEMU processes at the end."""
    import threading

    echoed, done, lock, procs = [], [], threading.Lock(), []
    t0 = time.time()

    def run(i):
        p = clone_start(kern, initrd, f"b{i}")
        with lock:
            procs.append(p)
        s = rf.connect(f"{rf.WORK}/b{i}.agent", tries=6000)
        rf.until(s, f"B{i}", f"echo B{i}\n")
        with lock:
            echoed.append(time.time() - t0)
        ask(s, f"/bin/true; echo P{i}\n", f"P{i}\n")
        with lock:
            done.append(time.time() - t0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    cpu = sum(cpu_s(p.pid) for p in procs)
    for p in procs:
        p.kill()
        p.wait()
    e, last = max(echoed), max(done)
    return {"n": n, "all_echoed_s": round(e, 2), "echoed_per_s": round(n / e, 2), "all_ran_a_process_s": round(last, 2),
            "ran_a_process_per_s": round(n / last, 2), "cpu_per_clone_ms": round(cpu / n * 1000, 1)}


def pss_kb(pid):
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def idle(kern, initrd, n, window):
    """n clones held at once; after they settle, each one's CPU over `window` s and its PSS."""
    procs, socks = [], []
    try:
        for i in range(n):
            procs.append(clone_start(kern, initrd, f"i{i}"))
            s = rf.connect(f"{rf.WORK}/i{i}.agent", tries=6000)
            rf.until(s, f"I{i}", f"echo I{i}\n")
            socks.append(s)
        time.sleep(10)
        c0, t0 = [cpu_s(p.pid) for p in procs], time.time()
        time.sleep(window)
        c1, t1 = [cpu_s(p.pid) for p in procs], time.time()
        cpu = [(b - a) / (t1 - t0) * 100 for a, b in zip(c0, c1)]
        pss = [pss_kb(p.pid) / 1024 for p in procs]
        ok = 0
        for i, s in enumerate(socks):
            s.settimeout(120)
            try:
                ask(s, f"/bin/true && echo Q{i}\n", f"Q{i}\n")
                ok += 1
            except OSError:
                pass
        q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p / 100 * len(xs)))]
        return {"n": n, "window_s": window, "answered_true": ok,
                "cpu_pct_of_core_p50": round(q(cpu, 50), 3), "cpu_pct_of_core_p95": round(q(cpu, 95), 3),
                "pss_mib_p50": round(q(pss, 50), 1), "pss_mib_p95": round(q(pss, 95), 1)}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clones", type=int, default=6)
    ap.add_argument("--burst", type=int, default=64)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--cpu", help="a -cpu model for the template and its clones (e.g. qemu64,+arat)")
    a = ap.parse_args()
    # Killed by a bench's cleanup: unwind so every clone is stopped (the `finally`s).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.cpu:
        CPU.extend(["-cpu", a.cpu])
    kern, initrd = rf.prepare()
    isolate()
    template(kern, initrd)
    out = {"source": "bare QEMU copy-on-write clones of raw-floor.py's busybox guest (no sandtree code)",
           "cpus": os.cpu_count(), "cpu_model": a.cpu or "qemu default"}
    if a.clones > 0:
        out["clone"] = one_by_one(kern, initrd, a.clones)
    if a.idle > 0:
        out["idle"] = idle(kern, initrd, a.idle, a.window)
    if a.burst > 0:
        out["burst"] = burst(kern, initrd, a.burst)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in STARTED:
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.path.exists(RAM):
            os.unlink(RAM)
        if rf.WORK.startswith(tempfile.gettempdir() + "/floor-clone-"):
            subprocess.run(["rm", "-rf", rf.WORK])
