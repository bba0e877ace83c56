#!/usr/bin/env node
// Volumes (NFSv3 from the host's NFS-Ganesha, MachineSpec.mounts) against the sandbox's own disk
// (qcow2 on virtio-blk) and the host's disk, in one run: sequential write (fsync) and read (guest
// caches dropped) MB/s, small-file creates per second, a 10,000-file tree walk (lstat of
// every entry) and `git status` of that tree committed (the host's git binary, run from the
// volume in the guest: the image has none) in ms. One sandbox of sandtree/debian mounts one host
// directory (bench/lib/volume-sandbox.mjs). Medians of BENCH_RUNS (default 3). Prints one JSON object,
// the floor (bare QEMU, ../shared/bench/raw-floor.py, same run, after the probes) beside.
//   node bench/volumes.mjs        (root; after scripts/setup.sh; BENCH_MB=128 by default)
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { measureFloor } from "./lib/floor.mjs";
import { guestRun, startVolumeSandbox } from "./lib/volume-sandbox.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const MB = Number(process.env.BENCH_MB ?? 128);
const FILES = 1000;

// One Python program measures a directory wherever it runs (guest or host): JSON of one run.
const PROBE = String.raw`
import json, os, sys, time
d, mb, files, drop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
os.makedirs(d, exist_ok=True)
out = {}
big = os.path.join(d, "big")
buf = b"\xa5" * (1 << 20)
t = time.monotonic()
with open(big, "wb") as f:
    for _ in range(mb): f.write(buf)
    f.flush(); os.fsync(f.fileno())
out["seq_write_mb_s"] = mb / (time.monotonic() - t)
if drop:
    os.sync(); open("/proc/sys/vm/drop_caches", "w").write("3\n")
t = time.monotonic()
with open(big, "rb", buffering=0) as f:
    while f.read(1 << 20): pass
out["seq_read_mb_s"] = mb / (time.monotonic() - t)
os.unlink(big)
small = os.path.join(d, "small"); os.makedirs(small)
t = time.monotonic()
for i in range(files):
    with open(os.path.join(small, "f%d" % i), "wb") as f: f.write(b"x" * 1024)
out["small_creates_per_s"] = files / (time.monotonic() - t)
tree = os.path.join(d, "tree")
for i in range(100):
    sub = os.path.join(tree, "d%d" % i); os.makedirs(sub)
    for j in range(100): open(os.path.join(sub, "f%d" % j), "wb").close()
def walk():
    n = 0
    for root, dirs, fs in os.walk(tree):
        for name in fs: os.lstat(os.path.join(root, name)); n += 1
    return n
walk()
t = time.monotonic(); n = walk()
out["tree_walk_10k_ms"] = (time.monotonic() - t) * 1000
assert n == 10000, n
git = sys.argv[5] if len(sys.argv) > 5 else ""
if git:
    import subprocess
    env = dict(os.environ, GIT_EXEC_PATH=os.path.dirname(git), HOME=d)
    g = lambda *a: subprocess.run([git, "-c", "user.email=b@b", "-c", "user.name=b", "-C", tree, *a], env=env, check=True, capture_output=True)
    g("init", "-q"); g("add", "-A"); g("commit", "-qm", "tree")
    g("status", "--porcelain")
    t = time.monotonic(); r = g("status", "--porcelain")
    out["git_status_10k_ms"] = (time.monotonic() - t) * 1000
    assert r.stdout == b"", r.stdout
for root, dirs, fs in os.walk(d, topdown=False):
    for name in fs: os.unlink(os.path.join(root, name))
    for name in dirs: os.rmdir(os.path.join(root, name))
print(json.dumps(out))
`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summarize = (runs) => Object.fromEntries(Object.keys(runs[0]).map((k) => [k, +median(runs.map((r) => r[k])).toFixed(1)]));

const guestProbe = async (machine, dir) =>
  JSON.parse(await guestRun(machine, ["python3", "-c", PROBE, dir, String(MB), String(FILES), "1", GUEST_GIT]));

const loadBefore = loadavg().map((x) => +x.toFixed(2));
// The host's git (Debian 12 on both sides), where the guest finds it: in the volume.
const HOST_GIT = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
const GUEST_GIT = "/mnt/vol/.gitbin/git";
const box = await startVolumeSandbox({
  prefix: "stvbench",
  octet: 247,
  beforeStart: (_dir, share) => {
    mkdirSync(path.join(share, ".gitbin"));
    copyFileSync(HOST_GIT, path.join(share, ".gitbin", "git"));
  },
});
const { machine, dir } = box;
try {
  const runs = { volume: [], sandbox_disk: [], host_disk: [] };
  for (let i = 0; i < RUNS; i++) {
    runs.volume.push(await guestProbe(machine, `/mnt/vol/b${i}`));
    runs.sandbox_disk.push(await guestProbe(machine, `/root/b${i}`));
    // The host's disk: the same filesystem the volume's directory is on (page cache not dropped).
    const hostOut = execFileSync("python3", ["-c", PROBE, path.join(dir, `host${i}`), String(MB), String(FILES), "0", HOST_GIT]);
    runs.host_disk.push(JSON.parse(hostOut.toString()));
  }
  const result = {
    bench: "volumes",
    medium: "NFSv3 (TCP) from NFS-Ganesha 4.3 (VFS) on the host, kernel client in the guest",
    accel: box.accel,
    runs: RUNS,
    seq_mb: MB,
    small_files: FILES,
    load_before: loadBefore,
    volume: summarize(runs.volume),
    sandbox_disk: summarize(runs.sandbox_disk),
    host_disk: summarize(runs.host_disk),
  };
  result.volume_vs_sandbox_disk = Object.fromEntries(
    Object.keys(result.volume).map((k) => [k, +(result.volume[k] / result.sandbox_disk[k]).toFixed(2)]),
  );
  result.load_after = loadavg().map((x) => +x.toFixed(2));
  result.floor = await measureFloor(box.accel);
  console.log(JSON.stringify(result, null, 2));
} finally {
  await box.close();
}
