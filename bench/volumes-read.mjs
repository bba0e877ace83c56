#!/usr/bin/env node
// Why sequential reads in a volume are slower than on the sandbox's own disk, A/B in one run: one
// sandtree/debian sandbox mounts one host directory (NFSv3 from NFS-Ganesha), writes a file of
// BENCH_MB (default 128) in the volume and on its own disk, then reads each with the guest's caches
// dropped, under each variant: the guest's NFS readahead (the mount's BDI read_ahead_kb: the kernel's
// default is 128 KiB, which the platform keeps), rsize, nconnect (second mounts of the same export
// with other options). The own disk's file is read back from the host's page cache (as the volume's is
// from Ganesha's host): both measure the guest's path, not a disk.
// Medians of BENCH_RUNS (default 3) per variant: MB/s, and MB per CPU second that QEMU and Ganesha
// spent on the read (utime + stime from /proc: under a loaded host the wall clock measures the
// load as much as the path; CPU seconds measure the path). Prints one JSON object.
//   node bench/volumes-read.mjs        (root; after scripts/setup.sh)
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { detectAccel, guestArtifacts, ImageStore, NetworkManager, VolumeFileServer } from "../packages/host/dist/index.js";
import { createOverlay, QemuMachineHost } from "../packages/host/dist/qemu.js";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const MB = Number(process.env.BENCH_MB ?? 128);

async function run(machine, argv) {
  const exec = machine.exec({ argv, user: "root", env: {}, timeoutMs: 900_000 });
  let out = "";
  let err = "";
  let code = -1;
  for await (const ev of exec.events) {
    if (ev.type === "stdout") out += ev.data;
    else if (ev.type === "stderr") err += ev.data;
    else if (ev.type === "exit") code = ev.info.exit_code;
  }
  if (code !== 0) throw new Error(`${argv.join(" ").slice(0, 200)} failed: ${err}${out}`);
  return out;
}
const sh = (machine, script) => run(machine, ["sh", "-c", script]);

// Reads FILE once (caches dropped first), after setting the readahead of the file's BDI when given: MB/s.
const READ = String.raw`
import os, sys, time
f, ra = sys.argv[1], int(sys.argv[2])
if ra > 0:
    st = os.stat(f)
    bdi = "/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(st.st_dev), os.minor(st.st_dev))
    open(bdi, "w").write(str(ra))
os.sync(); open("/proc/sys/vm/drop_caches", "w").write("3\n")
n = 0
t = time.monotonic()
with open(f, "rb", buffering=0) as h:
    while True:
        b = h.read(1 << 20)
        if not b: break
        n += len(b)
print(n / (1 << 20) / (time.monotonic() - t))
`;

/** CPU seconds (user + system) a process has used so far, from /proc/PID/stat (0 when it is gone). */
function cpuSeconds(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return +(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(1);
};

const loadBefore = loadavg().map((x) => +x.toFixed(2));
const dir = mkdtempSync("/tmp/stvread-");
const share = path.join(dir, "share");
mkdirSync(share);
const volumes = await VolumeFileServer.open({ dir: path.join(dir, "nfs") });
const net = new NetworkManager({
  tag: `vr${Math.floor(Math.random() * 999)}`,
  subnet: `10.246.${Math.floor(Math.random() * 250)}.0/24`,
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
    name: "vread",
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
  // The options the platform mounts with, read back from the guest, then variants of them on other paths.
  const mountLine = (await sh(machine, "grep ' /mnt/vol ' /proc/mounts")).trim().split(/\s+/);
  const [source, , , given] = mountLine;
  const portOf = (k) => given.split(",").find((o) => o.startsWith(`${k}=`));
  const common = [
    "vers=3",
    "proto=tcp",
    portOf("port"),
    portOf("addr"),
    "mountvers=3",
    "mountproto=tcp",
    portOf("mountport"),
    portOf("mountaddr"),
    "nolock",
    "hard",
    "timeo=50",
    "retrans=3",
  ];
  const variants = {
    "ra=128K (the kernel's default)": { path: "/mnt/vol", ra: 128 },
    "ra=1M": { path: "/mnt/vol", ra: 1024 },
    "ra=4M": { path: "/mnt/vol", ra: 4096 },
    "ra=16M": { path: "/mnt/vol", ra: 16384 },
    "rsize=256K ra=4M": { path: "/mnt/v256", ra: 4096, options: [...common, "rsize=262144", "wsize=262144"] },
    "nconnect=2 ra=4M": { path: "/mnt/vnc2", ra: 4096, options: [...common, "rsize=1048576", "wsize=1048576", "nconnect=2"] },
  };
  for (const v of Object.values(variants)) {
    if (!v.options) continue;
    await sh(machine, `mkdir -p ${v.path}`);
    // nosharecache: a second superblock (its own BDI and options) for the same export.
    await run(machine, ["/proc/1/exe", "mount", source, v.path, "nfs", [...v.options.filter(Boolean), "nosharecache"].join(",")]);
  }
  await sh(
    machine,
    `dd if=/dev/urandom of=/mnt/vol/big bs=1M count=${MB} conv=fsync 2>/dev/null && dd if=/dev/urandom of=/root/big bs=1M count=${MB} conv=fsync 2>/dev/null`,
  );
  const pids = [machine.pid, volumes.pid].filter(Boolean);
  const cpu = () => pids.reduce((t, p) => t + cpuSeconds(p), 0);
  const read = async (file, ra) => {
    const c0 = cpu();
    const mbs = Number((await run(machine, ["python3", "-c", READ, file, String(ra)])).trim());
    return { mbs, perCpu: MB / Math.max(cpu() - c0, 0.01) };
  };
  const volume = {};
  const volumeCpu = {};
  const disk_runs = [];
  const disk_cpu = [];
  for (let i = 0; i < RUNS; i++) {
    const d = await read("/root/big", 0);
    disk_runs.push(d.mbs);
    disk_cpu.push(d.perCpu);
    for (const [name, v] of Object.entries(variants)) {
      const r = await read(`${v.path}/big`, v.ra);
      (volume[name] ??= []).push(r.mbs);
      (volumeCpu[name] ??= []).push(r.perCpu);
    }
  }
  const sandbox_disk = median(disk_runs);
  const result = {
    bench: "volumes-read",
    accel,
    runs: RUNS,
    seq_mb: MB,
    mount_options: given,
    load_before: loadBefore,
    sandbox_disk_seq_read_mb_s: sandbox_disk,
    volume_seq_read_mb_s: Object.fromEntries(Object.entries(volume).map(([k, xs]) => [k, median(xs)])),
    volume_vs_sandbox_disk: Object.fromEntries(
      Object.entries(volume).map(([k, xs]) => [k, +(median(xs) / sandbox_disk).toFixed(2)]),
    ),
    sandbox_disk_mb_per_cpu_s: median(disk_cpu),
    volume_mb_per_cpu_s: Object.fromEntries(Object.entries(volumeCpu).map(([k, xs]) => [k, median(xs)])),
    load_after: loadavg().map((x) => +x.toFixed(2)),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  await machine?.stop({ graceMs: 0 }).catch(() => {});
  await volumes.close();
  await net.deleteTap(net.tapName(0)).catch(() => {});
  await net.destroy().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
