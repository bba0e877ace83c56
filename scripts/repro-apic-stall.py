#!/usr/bin/env python3
"""Reproduces the cold-boot hang of a TCG guest (docs/architecture.md, "Accelerator"): the guest's
local APIC timer calibration is starved and fails, and with no PIT the guest has no tick device.

Boots the cache's guest kernel and initramfs on bare QEMU with sandtree's TCG flags, polls QMP
`info lapic` until the calibration has armed its count (LVTT masked, initial count 0x0fffffff),
then stops QEMU (SIGSTOP) for --stop-ms and continues it: the kernel's loop catches up the missed
TSC ticks at once and measures almost no APIC counts. Prints one JSON line per boot: whether the
console says "APIC frequency too slow", and the vCPU's state after --settle-s (halted, LVTT).
  python3 scripts/repro-apic-stall.py [--boots N] [--stop-ms MS] [--no-stop] [--append ARGS] [--machine M]
Seen (2-core build machine, load 5-9): 4 of 4 starved boots failed their calibration and halted
(LVTT 0x000300ec, initial count 268435455, HLT=1) after "Run /init"; unstarved, the guest reached
its agent with its timer armed."""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "lib"))
from raw_qemu import connect_unix, khz  # noqa: E402

CACHE = os.environ.get("SANDTREE_CACHE_DIR", os.path.expanduser("~/.cache/sandtree"))

def qmp(path):
    s = connect_unix(path, 500)
    f = s.makefile("rw")
    f.readline()
    def cmd(name, args=None):
        f.write(json.dumps({"execute": name, **({"arguments": args} if args else {})}) + "\n")
        f.flush()
        while True:
            r = json.loads(f.readline())
            if "return" in r or "error" in r:
                return r.get("return")
    cmd("qmp_capabilities")
    return lambda line: cmd("human-monitor-command", {"command-line": line})

def boot(work, i, a):
    k = khz()
    con = os.path.join(work, f"console-{i}.log")
    sock = os.path.join(work, f"qmp-{i}.sock")
    append = f"console=ttyS0 panic=-1 reboot=t nowatchdog tsc_early_khz={k} lpj={k * 4} tsc=reliable sandtree.root=none {a.append}"
    p = subprocess.Popen(["qemu-system-x86_64", "-M", a.machine, "-accel", "tcg", "-cpu", "qemu64,+arat,-svm",
                          "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                          "-chardev", f"file,id=c,path={con}", "-serial", "chardev:c", "-qmp", f"unix:{sock},server=on,wait=off",
                          "-kernel", f"{CACHE}/kernel/vmlinuz", "-initrd", f"{CACHE}/guest/initramfs.cpio.gz", "-append", append])
    hmp = qmp(sock)
    armed = False
    t0 = time.time()
    while not a.no_stop and time.time() - t0 < 60:
        state = hmp("info lapic")
        lvtt = re.search(r"LVTT\s+0x([0-9a-f]+)", state)
        if lvtt and not int(lvtt.group(1), 16) & 0x10000:
            break  # unmasked: the calibration is over (it was not seen)
        if "initial_count = 268435455" in state:
            os.kill(p.pid, signal.SIGSTOP)
            time.sleep(a.stop_ms / 1000)
            os.kill(p.pid, signal.SIGCONT)
            armed = True
            break
    time.sleep(a.settle_s)
    lapic, regs = hmp("info lapic"), hmp("info registers")
    p.terminate()
    p.wait()
    text = open(con, errors="replace").read()
    lvtt = re.search(r"LVTT\s+(0x[0-9a-f]+)", lapic)
    timer = re.search(r"Timer\s+(.*)", lapic)
    return {"boot": i, "stopped_in_calibration": armed, "too_slow": "APIC frequency too slow" in text,
            "halted": "HLT=1" in regs, "lvtt": lvtt and lvtt.group(1), "timer": timer and timer.group(1).strip(),
            "console_tail": text.strip().splitlines()[-1][-120:] if text.strip() else ""}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--stop-ms", type=int, default=400)
    ap.add_argument("--settle-s", type=float, default=15)
    ap.add_argument("--no-stop", action="store_true")
    ap.add_argument("--append", default="")
    ap.add_argument("--machine", default="microvm,pit=off")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="apic-stall-") as work:
        for i in range(a.boots):
            print(json.dumps(boot(work, i, a)), flush=True)

if __name__ == "__main__":
    main()
