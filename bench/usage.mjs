#!/usr/bin/env node
// GET /v1/usage and a GET /metrics scrape over 1k, 10k and 100k metered sandbox records (sandboxes
// and their meter records seeded straight through the server's store, no VMs), against a plain
// count of the same records (`SELECT count(*) ... WHERE team_id = ?`) in the same run, on SQLite
// and, with --pg, on a throwaway PostgreSQL (scripts/lib/postgres.mjs), beside the floor (bare
// QEMU, no sandtree code). Two price entries: every record of the last 14 days is priced by the
// second. Then the dashboard's first load with 10,000 sandboxes (bench/dashboard.mjs, as a child)
// under `dashboard`, unless --no-dashboard. Each grouping's first call is reported apart (cold_ms);
// the count runs right after each timed group_by=day call, so both see the same load.
// Usage: node bench/usage.mjs [--sizes 1000,10000,100000] [--runs 7] [--pg] [--no-dashboard].
// Prints one JSON document; figures are medians (p50_ms).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { PgStore, SqliteStore, startServer } from "@sandtree/server";
import Database from "better-sqlite3";
import pg from "pg";
import { startPostgres } from "../scripts/lib/postgres.mjs";
import { measureFloor } from "./lib/floor.mjs";
import { endedSandboxRow } from "./lib/sandbox-row.mjs";
import { pct } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "1000,10000,100000" },
    runs: { type: "string", default: "7" },
    pg: { type: "boolean", default: false },
    "no-dashboard": { type: "boolean", default: false },
  },
});
const SIZES = values.sizes.split(",").map(Number);
const RUNS = Number(values.runs);
const DAY = 86_400_000;
const summary = (xs) => ({
  n: xs.length,
  first_ms: +xs[0].toFixed(2),
  p50_ms: +pct(xs, 50).toFixed(2),
  max_ms: +Math.max(...xs).toFixed(2),
});

async function timed(runs, fn) {
  const times = [];
  let out;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    out = await fn();
    times.push(performance.now() - t0);
  }
  return { times, out };
}

/** `rows` records over the last 28 days on at most 10,000 sandboxes; 1 in 10 PAUSED, 1 in 100 still open. */
async function seed(store, teamId, rows, now) {
  const sandboxes = Math.min(rows, 10_000);
  for (let i = 0; i < sandboxes; i++) {
    const at = new Date(now - 28 * DAY).toISOString();
    await store.insertSandbox(
      endedSandboxRow(teamId, at, {
        id: `sb-bench${String(i).padStart(8, "0")}`,
        cpu_cores: 1 + (i % 4),
        memory_gb: 0.25 * (1 + (i % 8)),
        disk_size_gb: 1 + (i % 10),
        labels: { project: `p-${i % 20}` },
      }),
    );
  }
  const records = [];
  for (let i = 0; i < rows; i++) {
    const start = now - 28 * DAY + Math.floor((i / rows) * 28 * DAY);
    const end = i % 100 === 0 ? null : start + (10 + (i % 121)) * 60_000;
    const id = `sb-bench${String(i % sandboxes).padStart(8, "0")}`;
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
}

/** One size on one store: a fresh server, seeded, then usage per grouping, /metrics and the count. */
async function measure(backend, rows, pgServer) {
  const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-usage-"));
  const dataDir = path.join(work, "data");
  const now = Date.now();
  const prices = [{}, { effective_from: new Date(now - 14 * DAY).toISOString(), vcpu_hour_usd: 0.018 }];
  const dbName = `usage_${rows}`;
  const database = pgServer ? await pgServer.createDatabase(dbName) : undefined;
  const server = await startServer({
    dataDir,
    host: "127.0.0.1",
    port: 0,
    logger: false,
    network: "off",
    prices,
    ...(database ? { database } : {}),
  });
  const h = { authorization: `Bearer ${server.firstKey}` };
  try {
    const teamId = (await (await fetch(`${server.url}/v1/teams`, { headers: h })).json()).teams[0].id;
    const seedStart = performance.now();
    const store = database ? await PgStore.open(database, { poolSize: 2 }) : new SqliteStore(path.join(dataDir, "sandtree.db"));
    await seed(store, teamId, rows, now);
    await store.close();
    const seedMs = performance.now() - seedStart;

    // The plain count, on its own connection, timed beside each run of group_by=day (same load).
    let countClose;
    let countOnce;
    if (database) {
      const c = new pg.Client({ connectionString: database });
      await c.connect();
      const q = "SELECT count(*) AS n FROM meter_records WHERE team_id = $1";
      countOnce = async () => Number((await c.query(q, [teamId])).rows[0].n);
      countClose = () => c.end();
    } else {
      const ro = new Database(path.join(dataDir, "sandtree.db"), { readonly: true });
      const stmt = ro.prepare("SELECT count(*) AS n FROM meter_records WHERE team_id = ?");
      countOnce = async () => stmt.get(teamId).n;
      countClose = async () => ro.close();
    }
    const count = { times: [], out: await countOnce() };

    const from = new Date(now - 30 * DAY).toISOString();
    const usage = {};
    let total = null;
    for (const group of ["day", "hour", "sandbox", "label", "team"]) {
      const q = `from=${from}&group_by=${group}${group === "label" ? "&label_key=project" : ""}`;
      const once = async () => {
        const res = await fetch(`${server.url}/v1/usage?${q}`, { headers: h });
        const body = await res.json();
        if (res.status !== 200) throw new Error(`usage answered ${res.status}: ${JSON.stringify(body)}`);
        return body;
      };
      // The first call of a grouping (cold: code not yet compiled, pages not yet read) on its own.
      const cold = await timed(1, once);
      const { times, out } = await timed(RUNS, async () => {
        const body = await once();
        if (group === "day") await timed(1, countOnce).then((c) => count.times.push(...c.times));
        return body;
      });
      total ??= out.total;
      usage[group] = { cold_ms: +(cold.times[0] ?? 0).toFixed(2), ...summary(times), lines: out.lines.length };
    }
    await countClose();
    const metrics = await timed(RUNS, async () => {
      const res = await fetch(`${server.url}/metrics`, { headers: h });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return Number(/^sandtree_metered_cost_usd (\S+)$/m.exec(text)?.[1]);
    });
    return {
      backend,
      records: count.out,
      seed_ms: +seedMs.toFixed(0),
      usage_by_group: usage,
      select_count: summary(count.times),
      metrics_scrape: summary(metrics.times),
      metered_cost_usd: metrics.out,
      total_cost_usd: total?.cost_usd,
    };
  } finally {
    await server.close();
    if (pgServer) await pgServer.dropDatabase(dbName).catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const results = [];
for (const rows of SIZES) results.push(await measure("sqlite", rows));
if (values.pg) {
  const pgServer = await startPostgres({ durable: false });
  try {
    for (const rows of SIZES) results.push(await measure("postgres", rows, pgServer));
  } finally {
    await pgServer.stop();
  }
}
for (const r of results) {
  r.usage_day_over_count = +(r.usage_by_group.day.p50_ms / r.select_count.p50_ms).toFixed(1);
}
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
      runs: RUNS,
      results,
      note: "usage_by_group: GET /v1/usage over loopback to the parsed answer, per grouping (cold_ms: its first call, untimed in the rest); select_count: SELECT count(*) of the same records (in-process for SQLite, over a pg connection for PostgreSQL), run after each group_by=day call; usage_day_over_count: p50 of group_by=day over p50 of the count; metrics_scrape: GET /metrics (first and p50); dashboard: bench/dashboard.mjs's output",
      floor,
      dashboard,
    },
    null,
    2,
  ),
);
