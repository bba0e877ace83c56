#!/usr/bin/env node
// GET /v1/usage for a team with 100,000 metered sandbox records (sandboxes and their meter
// records seeded straight through the server's store, no VMs), per grouping, against a plain
// `SELECT count(*)` of the same records in the same run, and the floor (bare QEMU, no sandtree
// code). Each usage call reads every record of the period, splits it at price changes (and at
// day/hour boundaries) and adds it up. Then the dashboard's first load with 10,000 sandboxes
// (bench/dashboard.mjs, run as a child: headless Chromium, against its own SELECT count(*)) under
// `dashboard`, unless --no-dashboard. Usage: node bench/usage.mjs [--rows 100000] [--runs 5]
// [--no-dashboard]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { SqliteStore, startServer } from "@sandtree/server";
import Database from "better-sqlite3";
import { measureFloor } from "./lib/floor.mjs";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "100000" },
    runs: { type: "string", default: "5" },
    "no-dashboard": { type: "boolean", default: false },
  },
});
const ROWS = Number(values.rows);
const RUNS = Number(values.runs);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => ({
  n: xs.length,
  first_ms: +xs[0].toFixed(2),
  p50_ms: +pct(xs, 50).toFixed(2),
  max_ms: +Math.max(...xs).toFixed(2),
});
const DAY = 86_400_000;

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-usage-"));
const dataDir = path.join(work, "data");
// Two price entries: every record in the second half of the period is split at the change.
const now = Date.now();
const prices = [{}, { effective_from: new Date(now - 14 * DAY).toISOString(), vcpu_hour_usd: 0.018 }];
const server = await startServer({ dataDir, host: "127.0.0.1", port: 0, logger: false, network: "off", prices });
const key = server.firstKey;
try {
  const teams = await (await fetch(`${server.url}/v1/teams`, { headers: { authorization: `Bearer ${key}` } })).json();
  const teamId = teams.teams[0].id;
  const dbPath = path.join(dataDir, "sandtree.db");
  const seedStart = performance.now();
  const store = new SqliteStore(dbPath);
  const records = [];
  for (let i = 0; i < ROWS; i++) {
    // Spread over the last 28 days; 10-130 minutes each; one in ten PAUSED, one in a hundred still open.
    const start = now - 28 * DAY + Math.floor((i / ROWS) * 28 * DAY);
    const end = i % 100 === 0 ? null : start + (10 + (i % 121)) * 60_000;
    const id = `sb-bench${String(i).padStart(8, "0")}`;
    const at = new Date(start).toISOString();
    await store.insertSandbox({
      id,
      name: null,
      team_id: teamId,
      image: "sandtree/busybox",
      image_digest: null,
      status: end === null ? "RUNNING" : "TERMINATED",
      cpu_cores: 1 + (i % 4),
      memory_gb: 0.25 * (1 + (i % 8)),
      disk_size_gb: 1 + (i % 10),
      environment_vars: {},
      labels: { project: `p-${i % 20}` },
      start_command: null,
      accel: null,
      error_reason: null,
      created_at: at,
      updated_at: at,
      started_at: at,
      terminated_at: end === null ? null : new Date(end).toISOString(),
    });
    const paused = i % 10 === 0;
    records.push({
      kind: "sandbox",
      subject_id: id,
      sandbox_id: id,
      team_id: teamId,
      state: paused ? "PAUSED" : "RUNNING",
      vcpus: paused ? 0 : 1 + (i % 4),
      memory_gib: paused ? 0 : 0.25 * (1 + (i % 8)),
      disk_gib: 1 + (i % 10),
      stored_bytes: 0,
      start_ms: start,
      end_ms: end,
    });
  }
  await store.insertMeterRecords(records);
  await store.close();
  const seedMs = performance.now() - seedStart;

  const from = new Date(now - 30 * DAY).toISOString();
  const h = { authorization: `Bearer ${key}` };
  const byGroup = {};
  let total = null;
  for (const group of ["day", "sandbox", "label", "team"]) {
    const times = [];
    for (let r = 0; r < RUNS; r++) {
      const t0 = performance.now();
      const res = await fetch(
        `${server.url}/v1/usage?from=${from}&group_by=${group}${group === "label" ? "&label_key=project" : ""}`,
        {
          headers: h,
        },
      );
      const body = await res.json();
      times.push(performance.now() - t0);
      if (res.status !== 200) throw new Error(`usage answered ${res.status}: ${JSON.stringify(body)}`);
      total ??= body.total;
      byGroup[group] = { ...stats(times), lines: body.lines.length };
    }
  }
  const csvTimes = [];
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    await (await fetch(`${server.url}/v1/usage?from=${from}&group_by=sandbox&format=csv`, { headers: h })).text();
    csvTimes.push(performance.now() - t0);
  }
  const countTimes = [];
  const ro = new Database(dbPath, { readonly: true });
  let counted = 0;
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    counted = ro.prepare("SELECT count(*) AS n FROM meter_records WHERE team_id = ?").get(teamId).n;
    countTimes.push(performance.now() - t0);
  }
  ro.close();
  const p50 = (g) => byGroup[g].p50_ms;
  const dashboard = values["no-dashboard"]
    ? null
    : JSON.parse(
        execFileSync(
          process.execPath,
          [new URL("./dashboard.mjs", import.meta.url).pathname, "--rows", "10000", "--runs", String(RUNS)],
          { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 * 1024 * 1024 },
        ),
      );
  console.log(
    JSON.stringify(
      {
        bench: "usage",
        records: counted,
        seed_ms: +seedMs.toFixed(0),
        usage_by_group: byGroup,
        usage_csv_by_sandbox: stats(csvTimes),
        select_count: stats(countTimes),
        usage_day_over_count: +(p50("day") / pct(countTimes, 50)).toFixed(1),
        total_cost_usd: total?.cost_usd,
        note: "usage_*: API call to parsed answer over loopback (every record read, priced and grouped); select_count: SELECT count(*) of the same records in-process; dashboard: bench/dashboard.mjs's output",
        floor,
        dashboard,
      },
      null,
      2,
    ),
  );
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
