"""Helpers of the Python scripts that boot bare QEMU (bench/kvm-tuning.py inside a sandbox, where
bench/kvm-nested.mjs uploads this beside it in lib/, and scripts/repro-apic-stall.py)."""
import socket
import time


def khz():
    """The host CPU's clock in kHz (/proc/cpuinfo's first `cpu MHz`), 0 when it says none."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            return int(float(line.split(":")[1]) * 1000)
    return 0


def connect_unix(path, tries):
    """A socket connected to `path`, tried every 10 ms up to `tries` times while QEMU creates it
    (unconnected after that: the caller's first read or write fails)."""
    s = socket.socket(socket.AF_UNIX)
    for _ in range(tries):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.01)
    return s
