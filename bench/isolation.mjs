#!/usr/bin/env node
// Defense in depth (docs/security.md, docs/limits.md): what the jail and the limits cost everyone,
// and what one hostile sandbox costs its neighbour, each beside the floor (bare QEMU,
// ../shared/bench/raw-floor.py, same run).
//   cost:       warm create (API call -> first output), exec `true`, and memory fork (4 children of
//               a memory checkpoint, call -> all answered), medians, on two servers of this one
//               process: one with the jail and limits (the default), one with both off (the
//               debugging settings SANDTREE_JAIL=off, SANDTREE_RESOURCE_LIMITS=0). Their samples
//               alternate, so the machine's load drifts over both alike. Aim: ratio < 1.10.
//   neighbour:  exec `true` p50/p99 of a quiet sandbox while another sandbox (same server, jail and
//               limits on) runs each hostile workload (CPU loops on every vCPU, I/O flood, disk fill,
//               memory hog, fork bomb: the bomb may end its sandbox), against quiet values measured
//               just before each workload; aim: p99 within 3x quiet. The I/O flood runs twice: at
//               the team default disk rate and at a lower one (io_flood_low_rate: A/B of the rate),
//               and once more on a server whose host opens disks O_DIRECT (io_flood_direct: A/B of
//               QemuMachineHostOptions.diskCache, `host` by default).
//   qemu_memory: QEMU's peak RSS beyond guest RAM (VmHWM minus RAM), 256 MiB and 1 GiB guests after
//               a boot, a CPU loop and a RAM-sized write (QEMU_OVERHEAD_MB allows for it).
// Usage: node bench/isolation.mjs [--execs 200] [--creates 7] [--forks 5] [--low-mbps 64] [--skip memory].
// Prints one JSON document.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createQemuHost, defaultJailConfig, detectAccel, MachineLimiter, QEMU_OVERHEAD_MB } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { pct, stats } from "./lib/stats.mjs";

const values = benchArgs({ execs: 200, creates: 7, forks: 5, "low-mbps": 64, skip: "" });
const { execs: EXECS, creates: CREATES, forks: FORKS, "low-mbps": LOW_MBPS } = values;
const SKIP = new Set(values.skip.split(",").filter(Boolean));
const SPEC = { image: "sandtree/busybox", cpu_cores: 1, memory_gb: 0.25, disk_size_gb: 1 };
const WORKLOADS = {
  cpu_loops: "for i in $(seq $(nproc)); do (while :; do :; done) & done; sleep 600",
  io_flood: "while :; do dd if=/dev/zero of=/flood bs=1M count=64 conv=fsync 2>/dev/null; rm -f /flood; done",
  disk_fill: "dd if=/dev/zero of=/fill bs=1M 2>/dev/null; sync; sleep 600",
  memory_hog: "while :; do for i in 1 2 3; do dd if=/dev/zero of=/dev/null bs=150M count=1 2>/dev/null & done; wait; done",
  fork_bomb: "b(){ b | b & }; b",
};

const accel = await detectAccel("auto");
const out = { bench: "isolation", accel, load_before: execFileSync("uptime", { encoding: "utf8" }).trim() };
out.floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-isolation-"));
const servers = [];
/** A server of this process; `diskCache` given: on a QEMU host built here with the jail, limits and that cache mode. */
const open = async (name, input, diskCache) => {
  const dataDir = path.join(work, name);
  let host;
  if (diskCache) {
    mkdirSync(dataDir, { recursive: true });
    const limiter = await MachineLimiter.open({ dataDir, network: true });
    host = createQemuHost({
      runRoot: path.join(dataDir, "run"),
      logRoot: path.join(dataDir, "machine-logs"),
      layersDir: path.join(dataDir, "layers"),
      volumesDir: path.join(dataDir, "volumes"),
      accel,
      jail: defaultJailConfig(),
      limiter,
      diskCache,
    });
  }
  const server = await startServer({ dataDir, port: 0, logger: false, ...input }, host ? { host } : {});
  servers.push(server);
  return new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
};
const create = async (client, spec = SPEC) => {
  const sb = await client.sandboxes.create(spec);
  await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10, timeoutMs: 300_000 });
  return sb.id;
};
const ready = async (client, id) => {
  await client.sandboxes.waitForCreation(id, { intervalMs: 10, timeoutMs: 300_000 });
  await client.sandboxes.run(id, ["echo", "ready"]);
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

/** One warm create: the call to its first output. */
async function warmCreate(client, made) {
  const t0 = performance.now();
  const sb = await client.sandboxes.create(SPEC);
  made.push(sb.id);
  await ready(client, sb.id);
  return performance.now() - t0;
}

/** One memory fork of 4: the call to every child's first output; the children are deleted. */
async function memoryFork(client, seed) {
  const t0 = performance.now();
  const { sandboxes } = await client.sandboxes.forkMany(seed, 4, { memory: true });
  await Promise.all(sandboxes.map((s) => ready(client, s.id)));
  const ms = performance.now() - t0;
  await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
  return ms;
}

/** Runs `command` in `hostile` while the neighbour's execs are timed; then ends it. */
async function underWorkload(client, hostile, neighbour, command) {
  const running = client.sandboxes.run(hostile, ["sh", "-c", command], { timeoutSeconds: 600 }).catch(() => {});
  await new Promise((r) => setTimeout(r, 3000));
  const under = await execTrue(client, neighbour, EXECS);
  const status = (await client.sandboxes.get(hostile)).status;
  // The workload's processes go with a fresh exec that kills them all (not the agent, PID 1).
  if (status === "RUNNING") {
    await client.sandboxes.run(hostile, ["sh", "-c", "kill -9 -1; rm -f /fill /flood; sync"]).catch(() => {});
    await running;
  }
  return { under, status };
}

/**
 * A quiet neighbour's exec `true` before and while a hostile sandbox runs each of `runs`
 * ([label, command, team limits to set first (a fresh hostile then starts under them)]).
 */
async function neighbours(client, runs) {
  const neighbour = await create(client);
  await execTrue(client, neighbour, 10);
  const res = { under: {}, quiet: [] };
  let hostile = null;
  for (const [label, command, limits] of runs) {
    if (limits) {
      await client.teams.setLimits("default", limits);
      if (hostile) await client.sandboxes.delete(hostile).catch(() => {});
      hostile = null;
    }
    hostile ??= await create(client);
    const quiet = await execTrue(client, neighbour, EXECS);
    res.quiet.push(...quiet);
    const { under, status } = await underWorkload(client, hostile, neighbour, command);
    res.under[label] = {
      ...stats(under),
      quiet: stats(quiet),
      p50_vs_quiet: ratio(pct(under, 50), pct(quiet, 50)),
      p99_vs_quiet: ratio(pct(under, 99), pct(quiet, 99)),
      hostile_status: status,
    };
    if (status !== "RUNNING") break;
  }
  await client.sandboxes.bulkDelete({ ids: [neighbour, ...(hostile ? [hostile] : [])] }).catch(() => {});
  return res;
}

try {
  const jailed = await open("jailed", {});
  const bare = await open("bare", { jail: "off", resourceLimits: false });
  const sides = [
    ["jail_and_limits", jailed],
    ["neither", bare],
  ];

  if (!SKIP.has("cost")) {
    // Each server's first start boots cold and builds its templates in the background.
    const seeds = {};
    for (const [name, client] of sides) seeds[name] = await create(client);
    await new Promise((r) => setTimeout(r, 20_000));
    const made = { jail_and_limits: [], neither: [] };
    const samples = Object.fromEntries(sides.map(([n]) => [n, { warm_create: [], exec_true: [], memory_fork_4: [] }]));
    for (let i = 0; i < CREATES; i++) {
      for (const [name, client] of sides) samples[name].warm_create.push(await warmCreate(client, made[name]));
    }
    for (let i = 0; i < EXECS / 20; i++) {
      for (const [name, client] of sides) samples[name].exec_true.push(...(await execTrue(client, seeds[name], 20)));
    }
    // A warm-up fork each, untimed (its first children's starts warm what later ones reuse).
    for (const [name, client] of sides) await memoryFork(client, seeds[name]);
    out.cost = {};
    for (let i = 0; i < FORKS; i++) {
      for (const [name, client] of sides) samples[name].memory_fork_4.push(await memoryFork(client, seeds[name]));
    }
    for (const [name] of sides) {
      const s = samples[name];
      out.cost[name] = {
        warm_create: stats(s.warm_create),
        exec_true: stats(s.exec_true),
        memory_fork_4: stats(s.memory_fork_4),
      };
    }
    const a = out.cost.jail_and_limits;
    const b = out.cost.neither;
    out.cost.ratio_p50 = Object.fromEntries(
      ["warm_create", "exec_true", "memory_fork_4"].map((k) => [k, ratio(a[k].p50_ms, b[k].p50_ms)]),
    );
    for (const [name, client] of sides) {
      await client.sandboxes.bulkDelete({ ids: [...made[name], seeds[name]] }).catch(() => {});
    }
  }

  if (!SKIP.has("neighbour")) {
    // Neighbour latency on the server with the jail and limits: every workload; the I/O flood also
    // from a hostile started with the team's disk rate lowered (A/B of the rate), and on a third
    // server whose host opens disks O_DIRECT (A/B of the disk cache mode).
    const buffered = await neighbours(jailed, [
      ["cpu_loops", WORKLOADS.cpu_loops],
      ["io_flood", WORKLOADS.io_flood],
      ["io_flood_low_rate", WORKLOADS.io_flood, { sandbox_disk_mbps: LOW_MBPS, sandbox_disk_iops: 1000 }],
      ["disk_fill", WORKLOADS.disk_fill, { sandbox_disk_mbps: null, sandbox_disk_iops: null }],
      ["memory_hog", WORKLOADS.memory_hog],
      ["fork_bomb", WORKLOADS.fork_bomb],
    ]);
    const directHost = await open("direct", { resourceLimits: true }, "direct");
    const odirect = await neighbours(directHost, [["io_flood_direct", WORKLOADS.io_flood]]);
    out.neighbour = { disk_cache: "host (the default)", under: { ...buffered.under, ...odirect.under } };
    out.neighbour.quiet_all = stats([...buffered.quiet, ...odirect.quiet]);
  }

  if (!SKIP.has("memory")) {
    // QEMU's memory beyond guest RAM, cold boots (no template mapping in its RSS).
    out.qemu_memory = { limit_overhead_mb: QEMU_OVERHEAD_MB };
    for (const gb of [0.25, 1]) {
      const id = await create(bare, { ...SPEC, memory_gb: gb, disk_size_gb: 2 });
      // A CPU loop (translation cache), then a write of the guest's RAM size: its page cache touches all its RAM.
      const fill = `(while :; do :; done) & sleep 5; kill $!; dd if=/dev/zero of=/w bs=1M count=${gb * 1024} conv=fsync 2>/dev/null; rm /w`;
      await bare.sandboxes.run(id, ["sh", "-c", fill], { timeoutSeconds: 600 });
      const pid = qemuPid(id);
      const ramMb = gb * 1024;
      out.qemu_memory[`guest_${ramMb}mb`] = {
        vm_hwm_mb: Math.round(statusKb(pid, "VmHWM") / 1024),
        rss_anon_mb: Math.round(statusKb(pid, "RssAnon") / 1024),
        overhead_mb: Math.round(statusKb(pid, "VmHWM") / 1024 - ramMb),
      };
      await bare.sandboxes.delete(id).catch(() => {});
    }
  }
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  for (const s of servers) await s.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
out.load_after = execFileSync("uptime", { encoding: "utf8" }).trim();
console.log(JSON.stringify(out, null, 2));
