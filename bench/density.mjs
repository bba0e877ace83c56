#!/usr/bin/env node
// Density: how many idle sandboxes this host holds and what each one costs while idle.
// Starts --count idle 256 MiB busybox sandboxes (then --debian Debian ones) on one server, in
// steps of --step, and prints one JSON document:
//   pss_mib:        PSS of each sandbox's QEMU (median, p95) once all are up
//   idle_cpu:       CPU of each QEMU over --window s of idleness (% of one core: median, p95) and
//                   the server's own CPU over the same window (the host side: liveness, timers),
//                   per sandbox and in all
//   host_mem:       MemTotal - MemAvailable before and with all up
//   answered:       every sandbox runs `exec true` after the window (how many answered, latency)
//   knee:           the N at which the first create failed, or a neighbour's `exec true` p99 (a
//                   sample after each step) passed 3x its value with one sandbox (null: never)
//   guest_irq_per_s: one sandbox's /proc/interrupts over the window, per source (where the
//                   guest's wake-ups come from)
//   floor:          the same figures for bare QEMU copy-on-write clones of raw-floor.py's guest
//                   (bench/floor-clone-cpu.py --idle, same run, the project's CPU model)
//   heavy:          with --heavy N: a CPU-heavy exec (HEAVY below: compression, hashing, sorting,
//                   awk, many short processes) timed in N of the idle busybox sandboxes, one at a
//                   time, with their QEMUs' translation cache (its RSS) after it; in Debian ones,
//                   HEAVY_DEB (Python running varied library code)
//   qemu:           the switches the server's VMs ran with (SANDTREE_FREE_PAGE_REPORTING,
//                   SANDTREE_TCG_TB_MB): A/B them with two runs, e.g.
//                   SANDTREE_TCG_TB_MB=32 node bench/density.mjs --count 60 --debian 0 --heavy 5
// Usage: node bench/density.mjs [--count 300] [--debian 10] [--step 25] [--window 30]
//        [--floor 30] [--heavy 0] [--no-network]
// Deletes everything it made, also on Ctrl-C.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { detectAccel } from "@sandtree/host";
import { freePageReporting, TCG_CPU_MODEL, tcgTbSizeMb } from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { floorScript } from "./lib/floor.mjs";
import { pct } from "./lib/stats.mjs";

const values = benchArgs({ count: 300, debian: 10, step: 25, window: 30, floor: 30, heavy: 0, "no-network": false });
const { count: COUNT, debian: DEBIAN, step: STEP, window: WINDOW_S, floor: FLOOR_N, heavy: HEAVY_N } = values;
const HEAVY =
  "dd if=/dev/urandom bs=1M count=4 2>/dev/null | gzip -c | gzip -dc | sha256sum >/dev/null; " +
  "seq 1 60000 | sort -rn | awk '{s+=$1} END {print s}' >/dev/null; " +
  "for i in $(seq 1 40); do md5sum /bin/busybox >/dev/null; done";
/** The Debian sandboxes' heavy exec: Python starting and running varied library code. */
const HEAVY_DEB =
  "for i in 1 2 3; do python3 -c 'import json, re, zlib, hashlib, random, decimal, email.parser, urllib.parse, sqlite3; " +
  'd = [{"k": random.random(), "s": str(i) * 20} for i in range(20000)]; t = json.dumps(d); ' +
  'zlib.compress(t.encode()); hashlib.sha256(t.encode()).hexdigest(); re.findall(r"[0-9]+", t); ' +
  'c = sqlite3.connect(":memory:"); c.execute("create table t(a)"); c.executemany("insert into t values (?)", [(x["k"],) for x in d]); ' +
  'print(c.execute("select sum(a) from t").fetchone())\' >/dev/null; done';
const NET = values["no-network"] ? { network: false } : {};
const BUSYBOX = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1, ...NET };
const DEB = { image: "sandtree/debian", memory_gb: 0.25, disk_size_gb: 2, ...NET };
const TICK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const r1 = (x) => (x === undefined || x === null ? null : +x.toFixed(1));
const r3 = (x) => (x === undefined || x === null ? null : +x.toFixed(3));
const summary = (xs, fix = r1) => ({ n: xs.length, p50: fix(pct(xs, 50)), p95: fix(pct(xs, 95)), max: fix(Math.max(...xs)) });

const meminfoKb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);
const usedMib = () => (meminfoKb("MemTotal") - meminfoKb("MemAvailable")) / 1024;
const cpuTicks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1).trim().split(/\s+/);
  return Number(f[11]) + Number(f[12]);
};
const pssMib = (pid) => Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0) / 1024;

/** sandbox id -> its QEMU's pid (the VM is named after the sandbox). */
function qemuPids(ids) {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  } catch {}
  const m = new Map();
  for (const line of out.split("\n")) {
    const id = ids.find((i) => line.includes(`sandtree-${i}`));
    if (id) m.set(id, Number.parseInt(line, 10));
  }
  return m;
}

/** Guest interrupts by source (`LOC`, `virtio0-...`), summed over CPUs. */
function parseInterrupts(text) {
  const out = {};
  for (const line of text.split("\n").slice(1)) {
    const m = /^\s*([^:]+):\s+([\d\s]+?)(\s+\D.*)?$/.exec(line);
    if (!m) continue;
    const n = m[2]
      .trim()
      .split(/\s+/)
      .map(Number)
      .reduce((a, b) => a + b, 0);
    const name = `${m[1].trim()}${m[3] ? ` ${m[3].trim().split(/\s+/).at(-1)}` : ""}`;
    out[name] = n;
  }
  return out;
}

const work = mkdtempSync(path.join(tmpdir(), "sandtree-density-"));
let server = null;
let client = null;
let floorChild = null;
const made = [];
let cleaning = null;
/** Idempotent: deletes every sandbox made, stops the server and the floor, removes the work dir. */
function cleanup() {
  cleaning ??= (async () => {
    floorChild?.kill("SIGTERM");
    if (client) {
      for (let i = 0; i < made.length; i += 100)
        await client.sandboxes.bulkDelete({ ids: made.slice(i, i + 100) }).catch(() => {});
    }
    await server?.close().catch(() => {});
    const left = qemuPids(made);
    for (const pid of left.values()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    if (left.size > 0) console.error(`killed ${left.size} QEMU processes left behind`);
    rmSync(work, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    console.error(`${sig}: cleaning up`);
    cleanup().finally(() => process.exit(130));
  });
}

/** Bare clones held idle (bench/floor-clone-cpu.py --idle), same accelerator and CPU model. */
function measureIdleFloor(accel, n) {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "floor-clone-cpu.py");
  const source = "floor-clone-cpu.py --idle: bare QEMU clones of raw-floor.py's guest, no sandtree code, same run";
  const args = [script, "--clones", "0", "--burst", "0", "--idle", String(n), "--window", String(WINDOW_S)];
  if (accel === "tcg") args.push("--cpu", TCG_CPU_MODEL);
  return new Promise((resolve) => {
    floorChild = spawn("python3", args, {
      env: { ...process.env, RAW_ACCEL: accel, SANDTREE_FLOOR_SCRIPT: floorScript() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    floorChild.stdout.on("data", (d) => (stdout += d));
    floorChild.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
    floorChild.on("error", (err) => resolve({ source, error: err.message }));
    floorChild.on("close", (code) => {
      floorChild = null;
      try {
        resolve(
          code === 0
            ? { source, ...JSON.parse(stdout.trim().split("\n").at(-1)) }
            : { source, error: `exit ${code}: ${stderr.trim()}` },
        );
      } catch {
        resolve({ source, error: `unreadable output: ${stdout.slice(-200)}` });
      }
    });
  });
}

/** The RSS of a QEMU's translation cache (its one rwx mapping under TCG), MiB. */
function tbRssMib(pid) {
  let inTb = false;
  let kb = 0;
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inTb = line.split(/\s+/)[1] === "rwxp";
    else if (inTb && line.startsWith("Rss:")) kb += Number(line.split(/\s+/)[1]);
  }
  return kb / 1024;
}

/** HEAVY in each of `ids`, one at a time: wall time, and the translation cache before and after. */
async function heavy(ids, command = HEAVY) {
  const pids = qemuPids(ids);
  const ms = [];
  const tbBefore = ids.map((id) => tbRssMib(pids.get(id)));
  for (const id of ids) {
    const t = performance.now();
    const r = await client.sandboxes.run(id, ["sh", "-c", command], { timeoutMs: 300_000 });
    if (r.exit_code !== 0) throw new Error(`heavy exec failed in ${id}: ${r.stderr}`);
    ms.push(performance.now() - t);
  }
  return {
    command,
    wall_ms: summary(ms),
    tb_rss_mib_idle: summary(tbBefore),
    tb_rss_mib_after: summary(ids.map((id) => tbRssMib(pids.get(id)))),
  };
}

/** `exec true` in each of `ids` (8 at a time): latencies of those that answered, and failures. */
async function execTrue(ids) {
  const ms = [];
  const failed = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(8, ids.length) }, async () => {
      while (next < ids.length) {
        const id = ids[next++];
        const t = performance.now();
        try {
          const r = await client.sandboxes.run(id, ["true"], { timeoutMs: 120_000 });
          if (r.exit_code === 0) ms.push(performance.now() - t);
          else failed.push(`${id}: exit ${r.exit_code}`);
        } catch (err) {
          failed.push(`${id}: ${err.message}`);
        }
      }
    }),
  );
  return { ms, failed };
}

/** Creates `n` sandboxes of `spec` in steps, sampling neighbours' `exec true` after each step. */
async function fill(spec, n, alone) {
  const ids = [];
  const steps = [];
  let knee = null;
  let firstFailure = null;
  while (ids.length < n && !firstFailure) {
    const k = Math.min(STEP, n - ids.length);
    const made_ = await Promise.allSettled(Array.from({ length: k }, () => client.sandboxes.create(spec)));
    const batch = [];
    for (const r of made_) {
      if (r.status === "fulfilled") {
        made.push(r.value.id);
        batch.push(r.value.id);
      } else firstFailure ??= { at_n: ids.length + batch.length + 1, error: r.reason?.message };
    }
    const up = await Promise.allSettled(batch.map((id) => client.sandboxes.waitForCreation(id, { timeoutMs: 900_000 })));
    up.forEach((r, i) => {
      if (r.status === "fulfilled") ids.push(batch[i]);
      else firstFailure ??= { at_n: ids.length + 1, error: r.reason?.message };
    });
    // A neighbour's view: `exec true` in 20 sandboxes spread over those up.
    const sample = Array.from(
      { length: Math.min(20, ids.length) },
      (_, i) => ids[Math.floor((i * ids.length) / Math.min(20, ids.length))],
    );
    const s = await execTrue(sample);
    const p99 = s.ms.length ? pct(s.ms, 99) : null;
    steps.push({
      n: ids.length,
      exec_true_p50_ms: r1(s.ms.length ? pct(s.ms, 50) : null),
      exec_true_p99_ms: r1(p99),
      failed: s.failed.length,
      load_1m: loadavg()[0],
    });
    if (knee === null && alone && (s.failed.length > 0 || (p99 ?? Number.POSITIVE_INFINITY) > 3 * alone.p99)) knee = ids.length;
  }
  return { ids, steps, knee, firstFailure };
}

/** What a fill held and, if any, its idle figures (memory since `usedBefore`) and heavy phase (`command`). */
async function filledFigures(spec, asked, filled, usedBefore, command = HEAVY) {
  return {
    spec,
    asked,
    held: filled.ids.length,
    first_create_failure: filled.firstFailure,
    ...(filled.ids.length ? await idleFigures(filled.ids, usedBefore) : {}),
    ...(HEAVY_N > 0 && filled.ids.length ? { heavy: await heavy(filled.ids.slice(0, HEAVY_N), command) } : {}),
  };
}

/** Idle figures of `ids`: settle, then CPU over the window (QEMU and the server), PSS, memory. */
async function idleFigures(ids, usedBefore) {
  await sleep(15_000);
  const pids = qemuPids(ids);
  const irqSandbox = ids[0];
  const irq0 = (await client.sandboxes.run(irqSandbox, ["cat", "/proc/interrupts"])).stdout;
  const c0 = new Map([...pids].map(([id, pid]) => [id, cpuTicks(pid)]));
  const s0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(WINDOW_S * 1000);
  const secs = (performance.now() - t0) / 1000;
  const s1 = process.cpuUsage(s0);
  const cpu = [...pids].map(([id, pid]) => ((cpuTicks(pid) - (c0.get(id) ?? 0)) / TICK / secs) * 100);
  const irq1 = (await client.sandboxes.run(irqSandbox, ["cat", "/proc/interrupts"])).stdout;
  const a = parseInterrupts(irq0);
  const b = parseInterrupts(irq1);
  const irq = Object.fromEntries(
    Object.keys(b)
      .map((k) => [k, r3((b[k] - (a[k] ?? 0)) / secs)])
      .filter(([, v]) => v > 0),
  );
  const pss = [...pids.values()].map(pssMib);
  const tb = [...pids.values()].map(tbRssMib);
  const serverPct = ((s1.user + s1.system) / 1e6 / secs) * 100;
  const answered = await execTrue(ids);
  return {
    sandboxes: ids.length,
    qemu_processes: pids.size,
    warm_clones: [...pids.values()].filter((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("share=off")).length,
    pss_mib: summary(pss),
    tb_rss_mib: summary(tb),
    idle_cpu_pct_of_core: {
      window_s: r1(secs),
      // One clock tick of CPU time over the window: a per-sandbox figure is a multiple of it.
      resolution: r3(100 / TICK / secs),
      qemu_per_sandbox: summary(cpu, r3),
      qemu_all: r1(cpu.reduce((x, y) => x + y, 0)),
      server_all: r3(serverPct),
      server_per_sandbox: r3(serverPct / ids.length),
    },
    guest_irq_per_s: irq,
    host_mem_used_mib: {
      before: Math.round(usedBefore),
      all_up: Math.round(usedMib()),
      per_sandbox: r1((usedMib() - usedBefore) / ids.length),
    },
    answered_exec_true: {
      ok: answered.ms.length,
      of: ids.length,
      p50_ms: r1(pct(answered.ms, 50)),
      p99_ms: r1(pct(answered.ms, 99)),
      failed: answered.failed.slice(0, 5),
    },
  };
}

try {
  const accel = await detectAccel("auto");
  const load0 = loadavg();
  const floor = FLOOR_N > 0 ? await measureIdleFloor(accel, FLOOR_N) : null;
  const usedBefore = usedMib();
  server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
  client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
  const out = {
    bench: "density",
    accel,
    machine: { cores: cpus().length, mem_gib: +(meminfoKb("MemTotal") / 1024 ** 2).toFixed(1) },
    qemu: { free_page_reporting: freePageReporting(), tcg_tb_size_mib: tcgTbSizeMb() },
  };

  // One sandbox alone, a warm clone (the first creates of a shape boot while its template is
  // built): the `exec true` a neighbour is judged against, and its first exec after idling.
  let one = null;
  for (let tries = 0; ; tries++) {
    one = await client.sandboxes.create(BUSYBOX);
    made.push(one.id);
    await client.sandboxes.waitForCreation(one.id, { timeoutMs: 600_000 });
    const pid = qemuPids([one.id]).get(one.id);
    const warm = pid !== undefined && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("share=off");
    if (warm) break;
    await client.sandboxes.delete(one.id);
    if (tries > 40) throw new Error("no warm template after 40 tries: the figures would be of cold boots");
    await sleep(3000);
  }
  await sleep(10_000);
  const t = performance.now();
  await client.sandboxes.run(one.id, ["true"]);
  const firstExecMs = performance.now() - t;
  const aloneMs = [];
  for (let i = 0; i < 20; i++) {
    const t1 = performance.now();
    await client.sandboxes.run(one.id, ["true"]);
    aloneMs.push(performance.now() - t1);
  }
  const alone = { p50: pct(aloneMs, 50), p99: pct(aloneMs, 99) };
  await client.sandboxes.delete(one.id);
  out.alone = {
    first_exec_true_after_10s_idle_ms: r1(firstExecMs),
    exec_true_p50_ms: r1(alone.p50),
    exec_true_p99_ms: r1(alone.p99),
  };

  const bb = await fill(BUSYBOX, COUNT, alone);
  out.busybox = {
    ...(await filledFigures(BUSYBOX, COUNT, bb, usedBefore)),
    knee_n: bb.knee,
    knee_rule: "first N where a create failed or a 20-sandbox sample's exec true p99 passed 3x its value alone",
    steps: bb.steps,
  };
  await client.sandboxes.bulkDelete({ ids: bb.ids.slice(0, 100) });
  for (let i = 100; i < bb.ids.length; i += 100) await client.sandboxes.bulkDelete({ ids: bb.ids.slice(i, i + 100) });

  if (DEBIAN > 0) {
    await sleep(3000);
    const usedDeb = usedMib();
    const deb = await fill(DEB, DEBIAN, null);
    out.debian = await filledFigures(DEB, DEBIAN, deb, usedDeb, HEAVY_DEB);
  }
  out.floor = floor;
  out.ratio_vs_floor = floor?.idle
    ? {
        idle_cpu_p50: r3(out.busybox.idle_cpu_pct_of_core?.qemu_per_sandbox.p50 / floor.idle.cpu_pct_of_core_p50),
        pss_p50: r3(out.busybox.pss_mib?.p50 / floor.idle.pss_mib_p50),
      }
    : null;
  out.load_avg = { before: load0, after: loadavg() };
  out.aim = { held: ">= 300 busybox, all answering", idle_cpu_p50_pct: "<= 0.3", pss_p50_mib: "<= 30" };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await cleanup();
}
