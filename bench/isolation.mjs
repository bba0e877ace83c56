#!/usr/bin/env node
// Resource isolation (docs/limits.md): what one hostile sandbox costs its neighbour, and what the
// limits cost everyone, each beside the floor (bare QEMU, ../shared/bench/raw-floor.py, same run).
//   neighbour:  exec `true` p50/p99 of a quiet sandbox, alone and while another sandbox runs each
//               hostile workload (CPU loops on every vCPU, I/O flood, disk fill, memory hog,
//               fork bomb, in that order: the bomb may end its sandbox); aim: p99 within 3x quiet
//   limits_cost: warm create (API call -> first output) and exec `true`, on a server with limits
//               and on one with SANDTREE_RESOURCE_LIMITS=0 (the debugging setting), same run
//   qemu_memory: QEMU's peak RSS beyond guest RAM (VmHWM minus RAM) for 256 MiB and 1 GiB
//               guests after boot, a CPU loop and a 200 MiB write (the overhead the memory
//               limit allows for: QEMU_OVERHEAD_MB)
// Usage: node bench/isolation.mjs [--execs 100] [--creates 5]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel, QEMU_OVERHEAD_MB } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { pct, stats } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: { execs: { type: "string", default: "100" }, creates: { type: "string", default: "5" } },
});
const EXECS = Number(values.execs);
const CREATES = Number(values.creates);
const SPEC = { image: "sandtree/busybox", cpu_cores: 1, memory_gb: 0.25, disk_size_gb: 1 };
const WORKLOADS = {
  cpu_loops: "for i in $(seq $(nproc)); do (while :; do :; done) & done; sleep 600",
  io_flood: "while :; do dd if=/dev/zero of=/flood bs=1M count=64 conv=fsync 2>/dev/null; rm -f /flood; done",
  disk_fill: "dd if=/dev/zero of=/fill bs=1M 2>/dev/null; sync; sleep 600",
  memory_hog: "while :; do for i in 1 2 3; do dd if=/dev/zero of=/dev/null bs=150M count=1 2>/dev/null & done; wait; done",
  fork_bomb: "b(){ b | b & }; b",
};

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-isolation-"));
const servers = [];
const open = async (name, limits) => {
  const server = await startServer({ dataDir: path.join(work, name), port: 0, logger: false, resourceLimits: limits });
  servers.push(server);
  return new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
};
const create = async (client, spec = SPEC) => {
  const sb = await client.sandboxes.create(spec);
  await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10, timeoutMs: 300_000 });
  return sb.id;
};
const execTrue = async (client, id, n) => {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await client.sandboxes.run(id, ["true"]);
    ms.push(performance.now() - t0);
  }
  return ms;
};
const qemuPid = (id) =>
  Number(
    execFileSync("pgrep", ["-f", "--", `-name sandtree-${id}`], { encoding: "utf8" })
      .trim()
      .split("\n")[0],
  );
const statusKb = (pid, key) =>
  Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);

const out = { bench: "isolation", accel, load: execFileSync("uptime", { encoding: "utf8" }).trim(), floor };
try {
  const limited = await open("limited", true);
  const unlimited = await open("unlimited", false);

  // Neighbour latency: one quiet sandbox, one hostile one, on the server with limits.
  const neighbour = await create(limited);
  await execTrue(limited, neighbour, 10);
  const quiet = await execTrue(limited, neighbour, EXECS);
  out.neighbour = { quiet: stats(quiet), under: {} };
  const hostile = await create(limited);
  for (const [name, command] of Object.entries(WORKLOADS)) {
    const running = limited.sandboxes.run(hostile, ["sh", "-c", command], { timeoutSeconds: 600 }).catch(() => {});
    await new Promise((r) => setTimeout(r, 3000));
    const under = await execTrue(limited, neighbour, EXECS);
    const sb = await limited.sandboxes.get(hostile);
    out.neighbour.under[name] = {
      ...stats(under),
      p99_vs_quiet: ratio(pct(under, 99), pct(quiet, 99)),
      hostile_status: sb.status,
    };
    if (sb.status !== "RUNNING") break;
    // The workload's processes go with a fresh exec that kills them all (not the agent, PID 1).
    await limited.sandboxes.run(hostile, ["sh", "-c", "kill -9 -1; rm -f /fill /flood; sync"]).catch(() => {});
    await running;
  }

  // What the limits cost: warm creates and exec on each server (templates built by a first create).
  out.limits_cost = {};
  for (const [name, client] of [
    ["with_limits", limited],
    ["without_limits", unlimited],
  ]) {
    await create(client);
    await new Promise((r) => setTimeout(r, 15_000)); // the shape template builds in the background
    const creates = [];
    let last = "";
    for (let i = 0; i < CREATES; i++) {
      const t0 = performance.now();
      last = await create(client);
      await client.sandboxes.run(last, ["echo", "ready"]);
      creates.push(performance.now() - t0);
    }
    out.limits_cost[name] = { warm_create: stats(creates), exec_true: stats(await execTrue(client, last, EXECS)) };
  }
  const w = out.limits_cost;
  w.ratio_p50 = {
    warm_create: ratio(w.with_limits.warm_create.p50_ms, w.without_limits.warm_create.p50_ms),
    exec_true: ratio(w.with_limits.exec_true.p50_ms, w.without_limits.exec_true.p50_ms),
  };

  // QEMU's memory beyond guest RAM, cold boots (no template mapping in its RSS).
  out.qemu_memory = { limit_overhead_mb: QEMU_OVERHEAD_MB };
  for (const gb of [0.25, 1]) {
    const id = await create(unlimited, { ...SPEC, memory_gb: gb, disk_size_gb: 2 });
    // A CPU loop (translation cache), then a write of the guest's RAM size: its page cache touches all its RAM.
    const fill = `(while :; do :; done) & sleep 5; kill $!; dd if=/dev/zero of=/w bs=1M count=${gb * 1024} conv=fsync 2>/dev/null; rm /w`;
    await unlimited.sandboxes.run(id, ["sh", "-c", fill], { timeoutSeconds: 600 });
    const pid = qemuPid(id);
    const ramMb = gb * 1024;
    out.qemu_memory[`guest_${ramMb}mb`] = {
      vm_hwm_mb: Math.round(statusKb(pid, "VmHWM") / 1024),
      rss_anon_mb: Math.round(statusKb(pid, "RssAnon") / 1024),
      overhead_mb: Math.round(statusKb(pid, "VmHWM") / 1024 - ramMb),
    };
  }
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  for (const s of servers) await s.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 2));
