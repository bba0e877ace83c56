import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { detectCgroups, MachineCgroups, memoryLimitBytes } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qemuPidsFor, startTestServer, type TestServer } from "../helpers.js";

// Resource-hostile guests: root in one sandbox runs CPU loops on every vCPU, an I/O flood, a disk
// fill, a memory hog and a fork bomb. Each is contained by its cgroup, its disk or its own kernel,
// and a neighbour sandbox keeps answering. Two sandboxes for the whole file. No timing assertions
// (the figures are bench/isolation.mjs's).

const DISK_MBPS = 96;
let t: TestServer;
let hostile: string;
let neighbour: string;
let cgroups: MachineCgroups;
const GiB = 1024 ** 3;

type ExecResult = { stdout: string; stderr: string; exit_code: number; timed_out: boolean };
const run = async (id: string, command: string, timeout_seconds = 120): Promise<ExecResult> => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as ExecResult;
};
const neighbourAnswers = async () => expect((await run(neighbour, "true")).exit_code).toBe(0);
const cgroupFile = (controller: "cpu" | "memory" | "pids" | "blkio", file: string): string => {
  const l = cgroups.layout;
  const dir = l.version === 2 ? l.root : l[controller];
  return readFileSync(path.join(dir, "sandtree", `sandtree-${hostile}`, file), "utf8").trim();
};

beforeAll(async () => {
  const layout = detectCgroups();
  if (!layout) throw new Error("this host has no usable cgroups (FACTS.md: v1 controllers are expected)");
  cgroups = new MachineCgroups(layout);
  t = await startTestServer();
  // The default team's per-sandbox disk rate, low enough that a flood meets it.
  expect((await t.api("PUT", "/v1/teams/default/limits", { sandbox_disk_mbps: DISK_MBPS })).status).toBe(200);
  const create = async (disk: number) => {
    const r = await t.api("POST", "/v1/sandboxes", {
      image: "sandtree/busybox",
      cpu_cores: 1,
      memory_gb: 0.25,
      disk_size_gb: disk,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  [hostile, neighbour] = await Promise.all([create(1), create(1)]);
  await Promise.all([t.waitRunning(hostile), t.waitRunning(neighbour)]);
});
afterAll(async () => {
  await t?.close();
});

describe("a guest that attacks its host's resources", () => {
  it("runs in its own cgroup: CPU to its vCPUs, memory to its size plus QEMU's overhead, pids, disk rate", () => {
    const pid = qemuPidsFor([hostile])[0]?.trim().split(" ")[0];
    expect(pid).toBeTruthy();
    expect(cgroupFile("memory", "cgroup.procs").split("\n")).toContain(pid);
    expect(cgroupFile("pids", "cgroup.procs").split("\n")).toContain(pid);
    if (cgroups.layout.version === 1) {
      expect(cgroupFile("cpu", "cpu.cfs_quota_us")).toBe("100000");
      expect(cgroupFile("memory", "memory.limit_in_bytes")).toBe(String(memoryLimitBytes(256)));
      expect(cgroupFile("pids", "pids.max")).toBe("256");
      expect(cgroupFile("blkio", "blkio.throttle.write_bps_device")).toMatch(new RegExp(` ${DISK_MBPS * 1024 ** 2}$`));
    } else {
      expect(cgroupFile("cpu", "cpu.max")).toBe("100000 100000");
    }
  });

  it("tight loops on every vCPU: held to its quota, the neighbour still answers", async () => {
    const before = cgroups.usage(`sandtree-${hostile}`);
    const loop = await run(
      hostile,
      "n=$(nproc); for i in $(seq $n); do (while :; do :; done) & done; sleep 8; kill $(jobs -p); echo $n",
    );
    expect(loop.stdout.trim()).toBe("1");
    await neighbourAnswers();
    const after = cgroups.usage(`sandtree-${hostile}`);
    // The kernel's bandwidth control ran for it (periods are counted only under a quota). Whether
    // it was also throttled depends on the host having a core to spare beyond its quota: reported.
    expect(after.cpuPeriods).toBeGreaterThan(before.cpuPeriods);
    console.log(
      `cpu loops: ${after.cpuPeriods - before.cpuPeriods} periods, ${after.cpuThrottledPeriods - before.cpuThrottledPeriods} throttled`,
    );
  });

  it("an I/O flood goes through its cgroup's disk rate; a disk fill ends in ENOSPC inside, not on the host", async () => {
    const flood = await run(hostile, "dd if=/dev/zero of=/flood bs=1M count=96 conv=fsync 2>&1; rm -f /flood; sync");
    expect(flood.exit_code, flood.stdout).toBe(0);
    expect(cgroups.usage(`sandtree-${hostile}`).ioBytes).toBeGreaterThan(0);
    await neighbourAnswers();
    const fill = await run(hostile, "dd if=/dev/zero of=/fill bs=1M 2>&1; sync; df -k / | tail -1", 600);
    expect(fill.stdout).toMatch(/No space left on device/);
    // The overlay the guest writes never grows past its disk_size_gb (plus qcow2's own metadata).
    const layers = path.join(t.dataDir, "layers");
    const live = readdirSync(layers).filter((f) => f.startsWith(`live-${hostile}-`));
    expect(live.length).toBeGreaterThan(0);
    for (const f of live) expect(statSync(path.join(layers, f)).size).toBeLessThan(1 * GiB + 64 * 1024 ** 2);
    expect((await run(hostile, "rm -f /fill; sync; echo freed")).stdout).toContain("freed");
    await neighbourAnswers();
  });

  it("a memory hog is OOM-killed by its own kernel; QEMU stays within its cgroup's memory", async () => {
    // Three 150 MiB buffers in a 256 MiB guest: each allocation is allowed, touching them all is not.
    const hog = await run(
      hostile,
      "for i in 1 2 3; do dd if=/dev/zero of=/dev/null bs=150M count=1 & done; wait; dmesg | grep -ci 'out of memory'",
    );
    expect(Number(hog.stdout.trim().split("\n").at(-1))).toBeGreaterThan(0);
    const usage = cgroups.usage(`sandtree-${hostile}`);
    console.log(`memory hog: QEMU's cgroup peak ${Math.round(usage.memoryPeakBytes / 1024 ** 2)} MiB (page cache included)`);
    expect(usage.memoryPeakBytes).toBeLessThanOrEqual(memoryLimitBytes(256));
    expect(usage.oomKills).toBe(0);
    expect((await t.api("GET", `/v1/sandboxes/${hostile}`)).body.status).toBe("RUNNING");
    await neighbourAnswers();
  });

  it("a fork bomb: the sandbox stays RUNNING or ends ERROR with a reason; no host task escapes; the server's heap stays bounded", async () => {
    const heapBefore = process.memoryUsage().heapUsed;
    // Launched in the background: the bomb may leave its guest unable to answer anything.
    void t.api("POST", `/v1/sandboxes/${hostile}/exec`, { command: "b(){ b | b & }; b", timeout_seconds: 20 }).catch(() => {});
    await new Promise((r) => setTimeout(r, 15_000));
    await neighbourAnswers();
    expect(cgroups.usage(`sandtree-${hostile}`).pids).toBeLessThanOrEqual(256);
    const sb = (await t.api("GET", `/v1/sandboxes/${hostile}`)).body;
    expect(["RUNNING", "ERROR"]).toContain(sb.status);
    if (sb.status === "ERROR") expect(sb.error_reason).toBeTruthy();
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(256 * 1024 ** 2);
  });
});
