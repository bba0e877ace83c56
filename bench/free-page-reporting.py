#!/usr/bin/env python3
"""Does virtio-balloon free page reporting return a guest's freed memory, and what does it do to a
template's RAM file? QEMU 7.2, TCG, raw-floor.py's kernel with a busybox initramfs that also loads
virtio_balloon. For each RAM backing, a guest boots with `-device
virtio-balloon-device,free-page-reporting=on`, fills 100 MiB of its tmpfs with random data, deletes
it, and waits; QEMU's RSS is read before and after and, for a file-backed RAM, how many of the
file's pages changed and how many blocks it still holds.
  file-private: `memory-backend-file,share=off` on a RAM file (how every warm clone maps its
                template's RAM). The file is written beforehand (16 MiB of zeros, then 0xAB: the
                microvm firmware needs zeroed low memory), so a page that reads as zeros above
                16 MiB was punched out of the file: every other clone of that file would read zeros.
  file-private-preload: the same, with QEMU started under private-ram-discard.so (LD_PRELOAD,
                packages/host/jail/private-ram-discard.c, built by scripts/build-jailer.sh) and
                SANDTREE_PRIVATE_RAM naming the file: QEMU's hole punch in the file is skipped,
                its madvise(MADV_DONTNEED) still drops the private copies (how sandtree runs clones).
                Left out when the library is not built (--shim PATH names another).
  anonymous:    `memory-backend-ram` (a cold boot or a full restore).
Prints one JSON object.  python3 bench/free-page-reporting.py [--shim PATH]"""
import glob, importlib.util, json, os, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.environ.get("SANDTREE_FLOOR_SCRIPT") or os.path.join(HERE, "..", "..", "shared", "bench", "raw-floor.py")
spec = importlib.util.spec_from_file_location("raw_floor", SCRIPT)
rf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rf)
MB = 256
MODS = ["virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_balloon"]


def initrd(work):
    ir = os.path.join(work, "ir")
    shutil.copytree(f"{rf.WORK}/ir", ir)
    for m in MODS:
        shutil.copy(glob.glob(f"{rf.WORK}/x/lib/modules/*/kernel/drivers/*/{m}.ko")[0], f"{ir}/lib/modules/")
    with open(f"{ir}/init", "w") as f:
        f.write("#!/bin/busybox sh\n/bin/busybox --install -s /bin\nmount -t proc proc /proc\nmount -t sysfs sys /sys\n"
                "mount -t devtmpfs dev /dev\nmount -t tmpfs tmp /tmp\n" + "".join(f"insmod /lib/modules/{m}.ko\n" for m in MODS)
                + "P=$(ls /dev/vport*p1 | head -1)\nwhile true; do sh 0<>$P 1>&0 2>&0; sleep 0.2; done\n")
    os.chmod(f"{ir}/init", 0o755)
    subprocess.run(f"cd {ir} && find . | cpio -o -H newc 2>/dev/null | gzip -1 > {work}/initrd.gz", shell=True, check=True)
    return f"{work}/initrd.gz"


def rss_mib(pid):
    return int([l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1]) // 1024


def file_pages_lost(path):
    """Pages above 16 MiB that no longer hold the 0xAB written there."""
    lost, ab, off = 0, b"\xab" * 4096, 0
    with open(path, "rb") as f:
        while True:
            b = f.read(4096)
            if not b:
                break
            if off >= 16 << 20 and b != ab:
                lost += 1
            off += 4096
    return lost


def case(kern, ird, work, backing, shim=None):
    agent = f"{work}/{backing}.agent"
    ram = f"/dev/shm/fpr-{os.getpid()}-{backing}.ram"
    mem = ["-object", f"memory-backend-ram,id=mem,size={MB}M"]
    env = dict(os.environ)
    if backing.startswith("file-private"):
        with open(ram, "wb") as f:
            for i in range(MB):
                f.write((b"\0" if i < 16 else b"\xab") * (1 << 20))
        mem = ["-object", f"memory-backend-file,id=mem,size={MB}M,mem-path={ram},share=off"]
        if shim:
            st = os.stat(ram)
            env.update(LD_PRELOAD=shim, SANDTREE_PRIVATE_RAM=f"{st.st_dev}:{st.st_ino}")
    k = rf.khz()
    p = subprocess.Popen(["qemu-system-x86_64", "-M", "microvm,pit=off,memory-backend=mem", "-accel", "tcg,tb-size=64", "-m", f"{MB}M",
                          "-smp", "1", "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none", "-serial", "none",
                          "-kernel", kern, "-initrd", ird, "-cpu", "qemu64,+arat,-svm",
                          "-append", f"console=ttyS0 quiet panic=-1 tsc_early_khz={k} lpj={k*4} tsc=reliable", *mem,
                          "-device", "virtio-balloon-device,free-page-reporting=on", "-device", "virtio-serial-device",
                          "-chardev", f"socket,id=ag,path={agent},server=on,wait=off", "-device", "virtserialport,chardev=ag,name=agent"],
                         stderr=subprocess.PIPE, env=env)
    try:
        s = rf.connect(agent, tries=60000)

        def sh(cmd, m):
            s.settimeout(600)
            s.sendall(f"{cmd}; echo {m}\n".encode())
            b = b""
            while f"{m}\n".encode() not in b:
                b += s.recv(65536)
            return b.decode(errors="replace").split(f"{m}\n")[0]

        sh("echo", "UP")
        ram_file = backing.startswith("file-private")
        out = {"backing": backing, "balloon_bound": "virtio" in sh("ls /sys/bus/virtio/drivers/virtio_balloon/", "B")}
        if ram_file:
            out["file_pages_lost_at_boot"] = file_pages_lost(ram)
        sh("dd if=/dev/urandom of=/tmp/big bs=1M count=100 2>/dev/null", "D")
        out["qemu_rss_mib_filled"] = rss_mib(p.pid)
        sh("rm /tmp/big", "R")
        time.sleep(10)  # the guest reports free pages 2 s after they gather
        out["qemu_rss_mib_after_free"] = rss_mib(p.pid)
        if ram_file:
            out["file_pages_lost_after_free"] = file_pages_lost(ram)
            out["file_mib_lost_after_free"] = round(out["file_pages_lost_after_free"] * 4096 / 2**20, 1)
            out["file_blocks_mib_after_free"] = os.stat(ram).st_blocks * 512 // 2**20
        return out
    finally:
        p.kill()
        p.wait()
        if os.path.exists(ram):
            os.unlink(ram)


def default_shim():
    cache = os.environ.get("SANDTREE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "sandtree")
    return os.path.join(cache, "jail", "private-ram-discard.so")


def main():
    shim = sys.argv[sys.argv.index("--shim") + 1] if "--shim" in sys.argv else default_shim()
    kern, _ = rf.prepare()
    work = tempfile.mkdtemp(prefix="fpr-")
    try:
        ird = initrd(work)
        res = [case(kern, ird, work, b) for b in ("anonymous", "file-private")]
        if os.path.exists(shim):
            res.append(case(kern, ird, work, "file-private-preload", os.path.abspath(shim)))
        print(json.dumps({"bench": "free-page-reporting", "qemu": subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True,
                          text=True).stdout.split("\n")[0], "file_mib": MB, "cases": res, "load_avg": os.getloadavg()}))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
