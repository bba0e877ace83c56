#!/usr/bin/env node
// Why sequential reads in a volume are slower than on the sandbox's own disk, A/B in one run: one
// sandtree/debian sandbox (bench/lib/volume-sandbox.mjs) mounts one host directory (NFSv3 from
// NFS-Ganesha), writes a file of BENCH_MB (default 128) in the volume and on its own disk, then
// reads each with the guest's caches dropped, under each lever of the NIC's path (set live
// between reads, in this order):
//   - the platform's NIC and mount as they are (the tap opened with a vnet header, the offloads
//     QEMU and the guest negotiated: `nic` in the output shows them);
//   - fewer, larger packets: the host tap's MTU 9000 and, in the guest, a host route to the server
//     that advertises an MSS of 8960 (only that route: egress elsewhere keeps 1500), on a second
//     mount of the same export through the gateway's address (a new TCP connection, so the new
//     MSS is negotiated);
//   - the tap's TSO off (the host's TCP hands the tap MSS-sized frames rather than 64 KiB GSO
//     frames: what the offloads are worth), with the 1500 and the 9000 MTU paths;
//   - the guest's GRO off with the tap's TSO off (what the guest's receive path does with small
//     frames);
//   - the guest's NFS readahead 4 MiB (the largest earlier lever, for reference);
//   - the NIC's receive ring: two more sandboxes, up at the same time, whose virtio-net device has
//     `rx_queue_size=1024` (QEMU's default 256) or `mrg_rxbuf=off` (big-packet receive buffers
//     rather than mergeable ones), read with the platform's settings otherwise.
// The own disk's file is read back from the host's page cache (as the volume's is from
// Ganesha's host): both measure the guest's path, not a disk. Medians of BENCH_RUNS (default 5)
// per variant, the variants interleaved within each round: MB/s, and MB per CPU second that QEMU
// and Ganesha spent on the read (utime + stime from /proc; under a loaded host the wall clock
// measures the load as much as the path, CPU seconds measure the path), and QEMU's share alone.
// Prints one JSON object, the floor (bare QEMU, ../shared/bench/raw-floor.py, same run, after the
// reads) beside.
//   node bench/volumes-read.mjs        (root; after scripts/setup.sh)
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { measureFloor } from "./lib/floor.mjs";
import { cpuSeconds, guestRun, startVolumeSandbox } from "./lib/volume-sandbox.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const MB = Number(process.env.BENCH_MB ?? 128);
const BIG_MTU = 9000;

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

// Legacy ethtool ioctls on one interface (host or guest; neither has ethtool): `IFACE NAME [0|1]`
// prints the setting (after setting it when given). NAME: tso, gso, gro, sg, txcsum, rxcsum.
const ETHTOOL = `
import array, fcntl, socket, struct, sys
GET = {"rxcsum": 0x14, "txcsum": 0x16, "sg": 0x18, "tso": 0x1e, "gso": 0x23, "gro": 0x2b}
iface, name = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def op(cmd, data=0):
    buf = array.array("I", [cmd, data])
    fcntl.ioctl(s, 0x8946, struct.pack("16sP", iface.encode(), buf.buffer_info()[0]))
    return buf[1]
if len(sys.argv) > 3: op(GET[name] + 1, int(sys.argv[3]))
print(op(GET[name]))
`;

// A host route in the guest (SIOCADDRT) to ADDR on eth0 whose advertised MSS is MTU - 40
// (rtentry's RTF_MTU sets the route's advmss): `ADDR MTU`.
const ROUTE = `
import ctypes, fcntl, socket, struct, sys
class Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_ushort), ("addr", ctypes.c_uint32), ("zero", ctypes.c_char * 8)]
class Rtentry(ctypes.Structure):
    _fields_ = [("pad1", ctypes.c_ulong), ("dst", Sockaddr), ("gateway", Sockaddr), ("genmask", Sockaddr),
                ("flags", ctypes.c_ushort), ("pad2", ctypes.c_short), ("pad3", ctypes.c_ulong), ("pad4", ctypes.c_void_p),
                ("metric", ctypes.c_short), ("dev", ctypes.c_char_p), ("mtu", ctypes.c_ulong), ("window", ctypes.c_ulong), ("irtt", ctypes.c_ushort)]
ip = lambda a: struct.unpack("=I", socket.inet_aton(a))[0]
r = Rtentry()
r.dst = Sockaddr(socket.AF_INET, 0, ip(sys.argv[1]))
r.genmask = Sockaddr(socket.AF_INET, 0, ip("255.255.255.255"))
r.flags = 0x1 | 0x4 | 0x40  # RTF_UP | RTF_HOST | RTF_MTU
r.dev = b"eth0"
r.mtu = int(sys.argv[2])
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 0x890B, bytes(r))
`;

// The guest's rx ring in use (ETHTOOL_GRINGPARAM's rx_pending).
const RING = `
import array, fcntl, socket, struct
buf = array.array("I", [0x10] + [0] * 8)
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 0x8946, struct.pack("16sP", b"eth0", buf.buffer_info()[0]))
print(buf[5])
`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return +(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(1);
};
/** Bits of a virtio feature string (/sys/.../features: one character per bit, bit 0 first). */
const VIRTIO_NET_BITS = { csum: 0, guest_csum: 1, guest_tso4: 7, guest_tso6: 8, host_tso4: 11, host_tso6: 12, mrg_rxbuf: 15 };

const loadBefore = loadavg().map((x) => +x.toFixed(2));
const uptimeBefore = execFileSync("uptime", { encoding: "utf8" }).trim();
// The platform's sandbox, and one per NIC device property (all up at once, read in turn).
const DEVICE_VARIANTS = { "rx_queue_size=1024": "rx_queue_size=1024", "mrg_rxbuf=off": "mrg_rxbuf=off" };
const boxes = [];
try {
  const box = await startVolumeSandbox({ prefix: "stvread", octet: 246 });
  boxes.push(box);
  const deviceBoxes = {};
  for (const [name, nicProperty] of Object.entries(DEVICE_VARIANTS)) {
    deviceBoxes[name] = await startVolumeSandbox({ prefix: "stvread", octet: 246, nicProperty });
    boxes.push(deviceBoxes[name]);
  }
  const run = (b, argv) => guestRun(b.machine, argv);
  const sh = (b, script) => run(b, ["sh", "-c", script]);
  const hostEthtool = (b, name, value) =>
    Number(
      execFileSync("python3", ["-c", ETHTOOL, b.tap, name, ...(value === undefined ? [] : [String(value)])], {
        encoding: "utf8",
      }).trim(),
    );
  const guestEthtool = async (b, name, value) =>
    Number((await run(b, ["python3", "-c", ETHTOOL, "eth0", name, ...(value === undefined ? [] : [String(value)])])).trim());
  // What each NIC negotiated (the platform's as it starts it), and its rx ring (ETHTOOL_GRINGPARAM).
  const nicOf = async (b) => {
    const features = (await sh(b, "cat /sys/class/net/eth0/device/features")).trim();
    const tunFlags = Number.parseInt(execFileSync("cat", [`/sys/class/net/${b.tap}/tun_flags`], { encoding: "utf8" }), 16);
    const nic = {
      tap_vnet_hdr: (tunFlags & 0x4000) !== 0,
      guest_virtio_net_features: Object.fromEntries(
        Object.entries(VIRTIO_NET_BITS).map(([k, bit]) => [k, features[bit] === "1"]),
      ),
      tap: Object.fromEntries(["tso", "gso", "sg", "txcsum"].map((k) => [k, hostEthtool(b, k)])),
      guest_eth0: {},
      guest_rx_ring: Number((await run(b, ["python3", "-c", RING])).trim()),
    };
    for (const k of ["tso", "gso", "gro", "rxcsum"]) nic.guest_eth0[k] = await guestEthtool(b, k);
    return nic;
  };
  const nic = await nicOf(box);
  const deviceNics = {};
  for (const [name, b] of Object.entries(deviceBoxes)) deviceNics[name] = await nicOf(b);
  // A second mount of the same export through the gateway's address, over a route whose MSS is
  // the large MTU's: its own TCP connection (the server's ports take the gateway address too).
  const [source, , , given] = (await sh(box, "grep ' /mnt/vol ' /proc/mounts")).trim().split(/\s+/);
  const portOf = (k) => given.split(",").find((o) => o.startsWith(`${k}=`));
  const options = ["vers=3", "proto=tcp", portOf("port"), "mountvers=3", "mountproto=tcp", portOf("mountport")];
  options.push("nolock", "hard", "timeo=50", "retrans=3", portOf("rsize"), portOf("wsize"));
  await run(box, ["python3", "-c", ROUTE, box.slot.gateway, String(BIG_MTU)]);
  execFileSync("ip", ["link", "set", box.tap, "mtu", String(BIG_MTU)]);
  await sh(box, "mkdir -p /mnt/vjumbo");
  const jumboSource = source.replace(/^[^:]+:/, `${box.slot.gateway}:`);
  const jumboOptions = [...options.filter(Boolean), `addr=${box.slot.gateway}`, `mountaddr=${box.slot.gateway}`, "nosharecache"];
  await run(box, ["/proc/1/exe", "mount", jumboSource, "/mnt/vjumbo", "nfs", jumboOptions.join(",")]);
  // The MSS each of the server's connections to the guest uses (the host's `ss`): 1448 and 8948.
  const ss = execFileSync("ss", ["-Htin", "state", "established", "dst", box.slot.address], { encoding: "utf8" });
  const serverMss = [...ss.matchAll(/\bmss:(\d+)/g)].map((m) => Number(m[1]));
  const write = `dd if=/dev/urandom of=/mnt/vol/big bs=1M count=${MB} conv=fsync 2>/dev/null`;
  await sh(box, `${write} && dd if=/dev/urandom of=/root/big bs=1M count=${MB} conv=fsync 2>/dev/null`);
  for (const b of Object.values(deviceBoxes)) await sh(b, write);
  // Each variant sets every lever (tap TSO, guest GRO, its mount's readahead). The tap's MTU stays
  // 9000: the MSS each connection negotiated (1460 on /mnt/vol, 8960 on /mnt/vjumbo) is the lever.
  const base = { box, tso: 1, gro: 1, ra: 128 };
  const variants = {
    "sandbox's own disk": { file: "/root/big", ra: 0 },
    "platform (MTU 1500, offloads on)": { file: "/mnt/vol/big" },
    "MTU 9000 to the server, offloads on": { file: "/mnt/vjumbo/big" },
    "tap TSO off, MTU 1500": { file: "/mnt/vol/big", tso: 0 },
    "tap TSO off, MTU 9000": { file: "/mnt/vjumbo/big", tso: 0 },
    "tap TSO off, guest GRO off, MTU 1500": { file: "/mnt/vol/big", tso: 0, gro: 0 },
    "readahead 4 MiB, offloads on": { file: "/mnt/vol/big", ra: 4096 },
  };
  for (const [name, b] of Object.entries(deviceBoxes)) variants[`NIC ${name}, offloads on`] = { file: "/mnt/vol/big", box: b };
  const read = async (b, file, ra) => {
    const q0 = cpuSeconds(b.machine.pid);
    const g0 = cpuSeconds(b.volumes.pid);
    const mbs = Number((await run(b, ["python3", "-c", READ, file, String(ra)])).trim());
    const q = cpuSeconds(b.machine.pid) - q0;
    const g = cpuSeconds(b.volumes.pid) - g0;
    return { mbs, perCpu: MB / Math.max(q + g, 0.01), qemuPerCpu: MB / Math.max(q, 0.01) };
  };
  const results = {};
  for (let i = 0; i < RUNS; i++) {
    for (const [name, v] of Object.entries(variants)) {
      const want = { ...base, ...v };
      hostEthtool(want.box, "tso", want.tso);
      await guestEthtool(want.box, "gro", want.gro);
      (results[name] ??= []).push(await read(want.box, want.file, want.ra));
    }
  }
  hostEthtool(box, "tso", 1);
  const of = (key) => Object.fromEntries(Object.entries(results).map(([k, rs]) => [k, median(rs.map((r) => r[key]))]));
  const mbs = of("mbs");
  const disk = mbs["sandbox's own disk"];
  const result = {
    bench: "volumes-read",
    accel: box.accel,
    runs: RUNS,
    seq_mb: MB,
    mount_options: given,
    nic,
    device_variant_nics: deviceNics,
    server_connection_mss: serverMss,
    uptime_before: uptimeBefore,
    load_before: loadBefore,
    seq_read_mb_s: mbs,
    vs_sandbox_disk: Object.fromEntries(Object.entries(mbs).map(([k, x]) => [k, +(x / disk).toFixed(2)])),
    mb_per_cpu_s_qemu_and_ganesha: of("perCpu"),
    mb_per_cpu_s_qemu: of("qemuPerCpu"),
    load_after: loadavg().map((x) => +x.toFixed(2)),
    uptime_after: execFileSync("uptime", { encoding: "utf8" }).trim(),
    floor: await measureFloor(box.accel),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  for (const b of boxes) await b.close();
}
