#!/usr/bin/env node
// Volumes (NFSv3 from the host's NFS-Ganesha, MachineSpec.mounts) against the sandbox's own disk
// (qcow2 on virtio-blk) and the host's disk, in one run: sequential write (fsync) and read (guest
// caches dropped) MB/s, small-file creates per second, a 10,000-file tree walk (lstat of
// every entry) and `git status` of that tree committed (the host's git binary, run from the
// volume in the guest: the image has none) in ms. One sandbox of sandtree/debian mounts one host
// directory. Medians of BENCH_RUNS (default 3). Prints one JSON object.
//   node bench/volumes.mjs        (root; after scripts/setup.sh; BENCH_MB=128 by default)
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { detectAccel, guestArtifacts, ImageStore, NetworkManager, VolumeFileServer } from "../packages/host/dist/index.js";
import { createOverlay, QemuMachineHost } from "../packages/host/dist/qemu.js";

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

async function guestProbe(machine, dir) {
  const exec = machine.exec({
    argv: ["python3", "-c", PROBE, dir, String(MB), String(FILES), "1", GUEST_GIT],
    user: "root",
    env: {},
    timeoutMs: 900_000,
  });
  let out = "";
  let err = "";
  let code = -1;
  for await (const ev of exec.events) {
    if (ev.type === "stdout") out += ev.data;
    else if (ev.type === "stderr") err += ev.data;
    else if (ev.type === "exit") code = ev.info.exit_code;
  }
  if (code !== 0) throw new Error(`guest probe failed in ${dir}: ${err}`);
  return JSON.parse(out);
}

const loadBefore = loadavg().map((x) => +x.toFixed(2));
const dir = mkdtempSync("/tmp/stvbench-");
const share = path.join(dir, "share");
mkdirSync(share);
// The host's git (Debian 12 on both sides), where the guest finds it: in the volume.
const HOST_GIT = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
mkdirSync(path.join(share, ".gitbin"));
copyFileSync(HOST_GIT, path.join(share, ".gitbin", "git"));
const GUEST_GIT = "/mnt/vol/.gitbin/git";
const volumes = await VolumeFileServer.open({ dir: path.join(dir, "nfs") });
const net = new NetworkManager({
  tag: `vb${Math.floor(Math.random() * 999)}`,
  subnet: `10.247.${Math.floor(Math.random() * 250)}.0/24`,
  resolverPort: 53,
  volumePorts: [volumes.ports.nfs, volumes.ports.mount],
});
let machine;
try {
  await net.init([]);
  const slot = net.slot(0);
  const tap = net.tapName(0);
  await net.createTap(tap, slot);
  const policy = { mode: "deny_all", allow: [], deny: [] };
  await net.addRules({ sandboxId: "bench", slot, tap, policy, tunnels: [], generation: 1, resolved: [] });
  const base = (await new ImageStore().resolve("sandtree/debian")).basePath;
  const disk = path.join(dir, "root.qcow2");
  await createOverlay(base, disk, 8 * 1024 ** 3);
  const { kernel, initramfs } = guestArtifacts();
  const accel = await detectAccel("auto");
  machine = await new QemuMachineHost({ volumes }).start({
    name: "vbench",
    accel,
    cpuCores: 1,
    memoryMb: 512,
    kernel,
    initramfs,
    rootDisk: disk,
    runDir: path.join(dir, "run"),
    logDir: path.join(dir, "log"),
    nic: { tap, guestNet: `${slot.address}/${slot.prefix} ${slot.gateway}` },
    mounts: [{ hostDir: share, guestPath: "/mnt/vol" }],
  });
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
    accel,
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
  console.log(JSON.stringify(result, null, 2));
} finally {
  await machine?.stop({ graceMs: 0 }).catch(() => {});
  await volumes.close();
  await net.deleteTap(net.tapName(0)).catch(() => {});
  await net.destroy().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
