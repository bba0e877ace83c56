import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  cgroupValues,
  DEFAULT_MACHINE_RATES,
  detectCgroups,
  ifbNameOf,
  MachineCgroups,
  memoryLimitBytes,
  tapRateCommands,
} from "../src/index.js";

// A fake cgroupfs: plain directories and files. Its "kernel" removes a directory whose cgroup.procs is empty.
const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
function fakeRoot(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), "cgfake-"));
  roots.push(root);
  for (const [f, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    writeFileSync(path.join(root, f), content);
  }
  return root;
}
const fakeRmdir = (dir: string) => {
  const procs = path.join(dir, "cgroup.procs");
  if (existsSync(procs) && readFileSync(procs, "utf8").trim() !== "") {
    throw Object.assign(new Error("EBUSY"), { code: "EBUSY" });
  }
  rmSync(dir, { recursive: true });
};
const v1Files = {
  "cpu/cgroup.procs": "1\n",
  "memory/cgroup.procs": "1\n",
  "pids/cgroup.procs": "1\n",
  "blkio/cgroup.procs": "1\n",
  "unified/cgroup.controllers": "",
};
const read = (root: string, f: string) => readFileSync(path.join(root, f), "utf8").trim();
const values = cgroupValues({ cpuCores: 2, memoryMb: 256 }, DEFAULT_MACHINE_RATES, "254:0");

describe("cgroup detection", () => {
  it("finds v2 when the unified root has every controller, v1 per controller (hybrid), else none", () => {
    expect(detectCgroups(fakeRoot({ "cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma" }))).toMatchObject({
      version: 2,
    });
    const v1 = fakeRoot(v1Files);
    expect(detectCgroups(v1)).toEqual({
      version: 1,
      cpu: path.join(v1, "cpu"),
      memory: path.join(v1, "memory"),
      pids: path.join(v1, "pids"),
      blkio: path.join(v1, "blkio"),
    });
    // A v2 root missing `io` and no v1 mounts: no limits possible.
    expect(detectCgroups(fakeRoot({ "cgroup.controllers": "cpu memory pids" }))).toBeNull();
  });
});

describe("a machine's cgroup", () => {
  it("v1: CPU quota per vCPU, memory = size + QEMU's overhead, pids, disk rates, the pid in every controller", () => {
    const root = fakeRoot(v1Files);
    const cg = new MachineCgroups(detectCgroups(root)!, { rmdir: fakeRmdir });
    cg.place("sandtree-sb-a", 4242, values);
    expect(read(root, "cpu/sandtree/sandtree-sb-a/cpu.cfs_period_us")).toBe("100000");
    expect(read(root, "cpu/sandtree/sandtree-sb-a/cpu.cfs_quota_us")).toBe("200000");
    expect(read(root, "memory/sandtree/sandtree-sb-a/memory.limit_in_bytes")).toBe(String(memoryLimitBytes(256)));
    expect(read(root, "pids/sandtree/sandtree-sb-a/pids.max")).toBe("256");
    expect(read(root, "blkio/sandtree/sandtree-sb-a/blkio.throttle.write_bps_device")).toBe(`254:0 ${256 * 1024 ** 2}`);
    expect(read(root, "blkio/sandtree/sandtree-sb-a/blkio.throttle.read_iops_device")).toBe("254:0 10000");
    for (const c of ["cpu", "memory", "pids", "blkio"])
      expect(read(root, `${c}/sandtree/sandtree-sb-a/cgroup.procs`)).toBe("4242");
    // Busy while its process is in it; removed (idempotently) once empty.
    expect(cg.remove("sandtree-sb-a")).toBe(false);
    for (const c of ["cpu", "memory", "pids", "blkio"])
      writeFileSync(path.join(root, c, "sandtree/sandtree-sb-a/cgroup.procs"), "");
    expect(cg.remove("sandtree-sb-a")).toBe(true);
    expect(cg.remove("sandtree-sb-a")).toBe(true);
    expect(existsSync(path.join(root, "memory/sandtree/sandtree-sb-a"))).toBe(false);
  });

  it("v2: enables the controllers down the tree and writes cpu.max, memory.max, pids.max, io.max", () => {
    const root = fakeRoot({ "cgroup.controllers": "cpu io memory pids" });
    const cg = new MachineCgroups(detectCgroups(root)!, { rmdir: fakeRmdir });
    cg.place("sandtree-sb-b", 77, values);
    expect(read(root, "cgroup.subtree_control")).toBe("+cpu +memory +pids +io");
    expect(read(root, "sandtree/cgroup.subtree_control")).toBe("+cpu +memory +pids +io");
    const d = "sandtree/sandtree-sb-b";
    expect(read(root, `${d}/cpu.max`)).toBe("200000 100000");
    expect(read(root, `${d}/memory.max`)).toBe(String(memoryLimitBytes(256)));
    expect(read(root, `${d}/memory.swap.max`)).toBe("0");
    expect(read(root, `${d}/io.max`)).toBe(`254:0 rbps=${256 * 1024 ** 2} wbps=${256 * 1024 ** 2} riops=10000 wiops=10000`);
    expect(read(root, `${d}/cgroup.procs`)).toBe("77");
    // The kernel's counters, read back.
    writeFileSync(path.join(root, d, "cpu.stat"), "usage_usec 900\nnr_periods 10\nnr_throttled 4\nthrottled_usec 1234\n");
    writeFileSync(path.join(root, d, "memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
    writeFileSync(path.join(root, d, "memory.current"), "1000\n");
    writeFileSync(path.join(root, d, "pids.current"), "9\n");
    writeFileSync(path.join(root, d, "io.stat"), "254:0 rbytes=100 wbytes=50 rios=1 wios=1\n");
    expect(cg.usage("sandtree-sb-b")).toEqual({
      cpuPeriods: 10,
      cpuThrottledPeriods: 4,
      cpuThrottledUs: 1234,
      memoryBytes: 1000,
      memoryPeakBytes: 1000,
      memoryLimitHits: 3,
      oomKills: 1,
      pids: 9,
      ioBytes: 150,
    });
    // No block device of its own (tmpfs data dir): no io.max line at all.
    cg.place("sandtree-sb-c", 78, cgroupValues({ cpuCores: 1, memoryMb: 512 }, DEFAULT_MACHINE_RATES, null));
    expect(existsSync(path.join(root, "sandtree/sandtree-sb-c/io.max"))).toBe(false);
  });

  it("the sweep at start removes empty old cgroups and keeps occupied or young ones", () => {
    const root = fakeRoot(v1Files);
    const cg = new MachineCgroups(detectCgroups(root)!, { rmdir: fakeRmdir });
    for (const [name, pid] of [
      ["sandtree-old", 1],
      ["sandtree-alive", 2],
      ["sandtree-young", 3],
    ] as const)
      cg.place(name, pid, values);
    for (const c of ["cpu", "memory", "pids", "blkio"]) {
      writeFileSync(path.join(root, c, "sandtree/sandtree-old/cgroup.procs"), "");
      writeFileSync(path.join(root, c, "sandtree/sandtree-young/cgroup.procs"), "");
      const old = new Date(Date.now() - 3_600_000);
      utimesSync(path.join(root, c, "sandtree/sandtree-old"), old, old);
      utimesSync(path.join(root, c, "sandtree/sandtree-alive"), old, old);
    }
    expect(cg.sweep({ minAgeMs: 60_000 })).toEqual(["sandtree-old"]);
    expect(cg.list().sort()).toEqual(["sandtree-alive", "sandtree-young"]);
  });

  it("a removal waiting on an old machine stops once the name was placed again (a reset)", async () => {
    const root = fakeRoot(v1Files);
    const cg = new MachineCgroups(detectCgroups(root)!, { rmdir: fakeRmdir });
    cg.place("sandtree-r", 1, values);
    const waiting = cg.removeWhenEmpty("sandtree-r", { timeoutMs: 10_000 });
    cg.place("sandtree-r", 2, values);
    expect(await waiting).toBe(false);
    expect(read(root, "memory/sandtree/sandtree-r/cgroup.procs")).toBe("2");
  });

  it("refuses a name that is not a plain directory name", () => {
    const cg = new MachineCgroups(detectCgroups(fakeRoot(v1Files))!);
    expect(() => cg.dirsOf("../escape")).toThrow(/bad machine name/);
  });
});

describe("a tap's network rate", () => {
  it("shapes both directions: tbf on the tap, and ingress redirected to a paired ifb with the same tbf", () => {
    expect(ifbNameOf("stab12-3f")).toBe("siab12-3f");
    const cmds = tapRateCommands("stab12-3f", 100, false).map((a) => a.join(" "));
    expect(cmds).toEqual([
      "ip link add siab12-3f type ifb",
      "ip link set siab12-3f up",
      "tc qdisc replace dev stab12-3f root tbf rate 100mbit burst 250000b latency 50ms",
      "tc qdisc replace dev siab12-3f root tbf rate 100mbit burst 250000b latency 50ms",
      "tc qdisc replace dev stab12-3f handle ffff: ingress",
      "tc filter replace dev stab12-3f parent ffff: prio 1 handle 800::800 protocol all u32 match u32 0 0 action mirred egress redirect dev siab12-3f",
    ]);
    // Applying again (a reset) reuses the ifb.
    expect(tapRateCommands("stab12-3f", 100, true).some((a) => a.includes("add"))).toBe(false);
  });
});
