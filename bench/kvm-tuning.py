#!/usr/bin/env python3
"""What the TCG-only choices cost or save under KVM (bench/kvm-nested.mjs runs this INSIDE a
sandbox with nested virtualization, beside raw-floor.py, with its kernel and busybox initramfs).
Bare QEMU, no sandtree code: for each variant, cold boots to the first serial command and then
the QEMU process's CPU time over an idle window (utime+stime from /proc/PID/stat, as L1 sees it).
Variants: the PIT kept (sandtree's KVM choice) or dropped (`pit=off`, its TCG choice), and the
TCG command-line flags (`tsc_early_khz`, `lpj`, `tsc=reliable`) given or not.
Usage: RAW_WORK=DIR [RAW_ACCEL=kvm] python3 kvm-tuning.py [--boots 3] [--idle 10]
Prints one JSON object."""
import glob, json, os, socket, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from raw_qemu import connect_unix, khz  # noqa: E402

WORK = os.environ.get("RAW_WORK", "/opt/raw")
ACCEL = os.environ.get("RAW_ACCEL", "kvm")
BOOTS = int(sys.argv[sys.argv.index("--boots") + 1]) if "--boots" in sys.argv else 3
IDLE = float(sys.argv[sys.argv.index("--idle") + 1]) if "--idle" in sys.argv else 10.0
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def boot(kern, initrd, machine, append, tag):
    sock = f"{WORK}/tune-{tag}.agent"
    if os.path.exists(sock):
        os.unlink(sock)
    args = ["qemu-system-x86_64", "-M", machine, "-accel", ACCEL, "-cpu", "host" if ACCEL == "kvm" else "qemu64",
            "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-serial", "none",
            "-kernel", kern, "-initrd", initrd, "-append", append,
            "-device", "virtio-serial-device", "-chardev", f"socket,id=ag,path={sock},server=on,wait=off",
            "-device", "virtserialport,chardev=ag,name=agent"]
    t = time.time()
    p = subprocess.Popen(args)
    s = connect_unix(sock, 3000)
    s.settimeout(0.3)
    buf = b""
    while b"UP" not in buf:
        if time.time() - t > 180:
            s.close()
            p.kill()
            p.wait()
            raise RuntimeError(f"{tag}: no first command in 180 s")
        try:
            s.sendall(b"echo UP\n")
            buf += s.recv(65536)
        except (socket.timeout, OSError):
            time.sleep(0.1)
    return p, s, time.time() - t


def variant(kern, initrd, machine, append, tag):
    boots, idle = [], []
    for i in range(BOOTS):
        p, s, dt = boot(kern, initrd, machine, append, f"{tag}{i}")
        boots.append(dt)
        time.sleep(2)  # past the boot's own work
        c0 = cpu_s(p.pid)
        time.sleep(IDLE)
        idle.append((cpu_s(p.pid) - c0) / IDLE * 100)
        s.close()
        p.kill()
        p.wait()
    return {"cold_boot_to_first_command_s_p50": round(statistics.median(boots), 3),
            "idle_cpu_pct_of_a_core_p50": round(statistics.median(idle), 3)}


def main():
    kern = glob.glob(f"{WORK}/x/boot/vmlinuz-*")[0]
    initrd = f"{WORK}/initrd.gz"
    k = khz()
    base = "console=ttyS0 quiet panic=-1 nowatchdog"
    tcg_flags = f" tsc_early_khz={k} lpj={k * 4} tsc=reliable"
    out = {"accel": ACCEL, "boots": BOOTS, "idle_window_s": IDLE, "nested": ACCEL == "kvm",
           "note": "bare QEMU; CPU is the L2 QEMU process's as its host (L1) counts it"}
    for name, machine, append, tag in [("pit_kept", "microvm", base, "pk"), ("pit_off", "microvm,pit=off", base, "po"),
                                       ("pit_kept_tcg_cmdline_flags", "microvm", base + tcg_flags, "pf")]:
        try:
            out[name] = variant(kern, initrd, machine, append, tag)
        except RuntimeError as e:
            out[name] = {"error": str(e)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
