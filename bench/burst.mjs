#!/usr/bin/env node
// Burst creation through the API: N sandboxes (default 64) created in bursts of B (default 16).
// A burst fires B creates at once; the next burst starts as soon as the previous burst's create
// calls returned (201, still PENDING): nobody waits for RUNNING between bursts.
// Measures:
//   api_creates_per_s:  creates accepted / wall time from the first create call to the last answer
//   time_to_running:    per sandbox, from its create call to the first batch-status poll that saw
//                       it RUNNING (polled every 50 ms for all ids at once: resolution ~50 ms)
//   batch_status:       latency of POST /v1/sandboxes/batch-status for all N ids, 20 calls once all
//                       are up (and, separately, the polls made while they were booting)
//   baseline:           time to RUNNING of one sandbox alone on the idle machine, same run
//                       (median of --alone runs, after one warm-up that also resolves the image)
//   floor:              bare QEMU (../shared/bench/raw-floor.py, same run and accelerator): one
//                       cold boot and one copy-on-write clone to first command
// With --wait-running each burst must be RUNNING before the next is fired (for machines that
// cannot boot them all at once).
// Usage: node bench/burst.mjs [--count 64] [--burst 16] [--alone 3] [--wait-running]. Prints one JSON document;
// deletes everything it made.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { cpus, freemem, loadavg, tmpdir, totalmem } from "node:os";
import path from "node:path";
import { detectAccel } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureFloor } from "./lib/floor.mjs";

const values = benchArgs({ count: 64, burst: 16, alone: 3, "wait-running": false });
const { count: COUNT, burst: BURST, alone: ALONE, "wait-running": WAIT_RUNNING } = values;
const SPEC = { image: "sandtree/busybox", memory_gb: 0.125, disk_size_gb: 1 };
const RUNNING_DEADLINE_MS = 600_000;
const ENDED = ["ERROR", "TERMINATED", "TIMEOUT"];

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const stats = (xs) =>
  xs.length === 0
    ? { n: 0 }
    : {
        n: xs.length,
        p50_ms: +pct(xs, 50).toFixed(1),
        p99_ms: +pct(xs, 99).toFixed(1),
        max_ms: +Math.max(...xs).toFixed(1),
        min_ms: +Math.min(...xs).toFixed(1),
      };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function qemuCount(ids) {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  } catch {}
  return out.split("\n").filter((l) => ids.some((id) => l.includes(`sandtree-${id}`))).length;
}

const work = mkdtempSync(path.join(tmpdir(), "sandtree-burst-"));
const dataDir = path.join(work, "data");
const floor = await measureFloor(await detectAccel("auto"));
const server = await startServer({ dataDir, port: 0, logger: false });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const made = [];
try {
  // Baseline: one sandbox alone. The first (warm-up) resolves the image and warms caches.
  const alone = [];
  let accel = null;
  for (let i = 0; i <= ALONE; i++) {
    const t0 = performance.now();
    const sb = await client.sandboxes.create(SPEC);
    made.push(sb.id);
    accel = sb.accel;
    for (;;) {
      const s = await client.sandboxes.get(sb.id);
      if (s.status === "RUNNING") break;
      if (ENDED.includes(s.status)) throw new Error(`baseline sandbox ${s.id} ended ${s.status}: ${s.error_reason}`);
      await sleep(20);
    }
    if (i > 0) alone.push(performance.now() - t0);
    await client.sandboxes.delete(sb.id);
  }

  // The bursts.
  const startedAt = new Map();
  const runningAt = new Map();
  const endedAs = new Map();
  const createMs = [];
  const ids = [];
  const pollMs = [];
  let peakQemu = 0;
  /** Polls batch-status for `some` until each is RUNNING or ended, noting when it was first seen RUNNING. */
  const settle = async (some) => {
    const open = () => some.filter((id) => !runningAt.has(id) && !endedAs.has(id)).length;
    while (open() > 0 && performance.now() - tFirst < RUNNING_DEADLINE_MS) {
      const t = performance.now();
      const r = await client.sandboxes.batchStatus(some);
      const now = performance.now();
      pollMs.push(now - t);
      for (const s of r.sandboxes) {
        if (s.status === "RUNNING" && !runningAt.has(s.id)) runningAt.set(s.id, now);
        if (ENDED.includes(s.status) && !endedAs.has(s.id)) endedAs.set(s.id, `${s.status}: ${s.error_reason}`);
      }
      if (pollMs.length % 20 === 0) peakQemu = Math.max(peakQemu, qemuCount(ids));
      await sleep(50);
    }
  };
  const load0 = loadavg()[0];
  let createWallMs = 0;
  const tFirst = performance.now();
  for (let b = 0; b < COUNT / BURST; b++) {
    const tBurst = performance.now();
    const burst = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const t = performance.now();
        const sb = await client.sandboxes.create(SPEC);
        createMs.push(performance.now() - t);
        startedAt.set(sb.id, t);
        return sb.id;
      }),
    );
    createWallMs += performance.now() - tBurst;
    ids.push(...burst);
    made.push(...burst);
    if (WAIT_RUNNING) await settle(burst);
  }
  await settle(ids);
  const tAllUp = performance.now();
  const load1 = loadavg()[0];
  const toRunning = [...runningAt].map(([id, t]) => t - (startedAt.get(id) ?? t));

  // Batch-status latency for all ids once the machine has settled.
  const batch = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    await client.sandboxes.batchStatus(ids);
    batch.push(performance.now() - t);
  }

  // A sample exec proves the sandboxes answer.
  const probe = runningAt.size > 0 ? await client.sandboxes.run([...runningAt.keys()][0], ["echo", "ok"]) : null;

  const tDel = performance.now();
  const del = await client.sandboxes.bulkDelete({ ids });
  const deleteMs = performance.now() - tDel;

  console.log(
    JSON.stringify(
      {
        bench: "burst",
        accel,
        machine: { cores: cpus().length, mem_gib: +(totalmem() / 1024 ** 3).toFixed(1) },
        spec: SPEC,
        count: COUNT,
        burst: BURST,
        policy: WAIT_RUNNING
          ? "each burst waited for RUNNING before the next was fired"
          : "next burst fired as soon as the previous burst's create calls answered (no wait for RUNNING)",
        api_creates_per_s: +(COUNT / (createWallMs / 1000)).toFixed(1),
        create_call: stats(createMs),
        create_calls_wall_ms: +createWallMs.toFixed(1),
        time_to_running: stats(toRunning),
        all_running_after_ms: +(tAllUp - tFirst).toFixed(1),
        running: runningAt.size,
        ended: Object.fromEntries(endedAs),
        still_pending: ids.length - runningAt.size - endedAs.size,
        peak_qemu_processes_seen: peakQemu,
        batch_status_all_ids: stats(batch),
        batch_status_while_booting: stats(pollMs),
        baseline_single_alone_time_to_running: stats(alone),
        ratio_p50_vs_alone: alone.length ? +(pct(toRunning, 50) / pct(alone, 50)).toFixed(2) : null,
        probe_exec_ok: probe?.stdout === "ok\n",
        bulk_delete_ms: +deleteMs.toFixed(1),
        bulk_deleted: del.deleted.length,
        load_avg_1m: { before: load0, after_boot: load1 },
        free_mem_gib_after_boot: +(freemem() / 1024 ** 3).toFixed(1),
        floor,
      },
      null,
      2,
    ),
  );
} finally {
  await Promise.allSettled(made.map((id) => client.sandboxes.delete(id)));
  await server.close();
  const left = qemuCount(made);
  const layers = path.join(dataDir, "layers");
  const leftFiles = existsSync(layers) ? readdirSync(layers).filter((f) => f.startsWith("live-")) : [];
  if (left > 0 || leftFiles.length > 0) console.error(`leftovers: ${left} QEMU processes, files ${leftFiles.join(", ")}`);
  rmSync(work, { recursive: true, force: true });
}
