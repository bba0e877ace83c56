#!/usr/bin/env node
// The dashboard's first load with 10,000 sandboxes (rows seeded straight through the server's
// store, no VMs), in headless Chromium (Debian's chromium, playwright-core), against a plain
// `SELECT count(*)` of the same rows in the same run, the API calls behind the pages timed alone,
// and the floor (bare QEMU, no sandtree code).
//   overview: navigation to / (key already in the tab's session) -> the four cards drawn
//   sandboxes: navigation to #/sandboxes -> the first page of the table drawn
// Each run uses a fresh browser context (nothing cached). Usage: node bench/dashboard.mjs
// [--rows 10000] [--runs 5]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { SqliteStore, startServer } from "@sandtree/server";
import Database from "better-sqlite3";
import { chromium } from "playwright-core";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { endedSandboxRow } from "./lib/sandbox-row.mjs";

const { values } = parseArgs({ options: { rows: { type: "string", default: "10000" }, runs: { type: "string", default: "5" } } });
const ROWS = Number(values.rows);
const RUNS = Number(values.runs);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => ({
  n: xs.length,
  first_ms: +xs[0].toFixed(1),
  p50_ms: +pct(xs, 50).toFixed(1),
  max_ms: +Math.max(...xs).toFixed(1),
});
const STATUSES = ["TERMINATED", "TERMINATED", "TERMINATED", "ERROR", "TIMEOUT"];

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-dashboard-"));
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, host: "127.0.0.1", port: 0, logger: false, network: "off" });
const key = server.firstKey;
let browser;
try {
  const teams = await (await fetch(`${server.url}/v1/teams`, { headers: { authorization: `Bearer ${key}` } })).json();
  const teamId = teams.teams[0].id;
  const dbPath = path.join(dataDir, "sandtree.db");
  const store = new SqliteStore(dbPath);
  const seedStart = performance.now();
  const now = Date.now();
  for (let i = 0; i < ROWS; i++) {
    // Spread over the last 23 hours, so the overview's 24-hour window holds them all.
    const at = new Date(now - 23 * 3600_000 + Math.floor((i / ROWS) * 23 * 3600_000)).toISOString();
    await store.insertSandbox(
      endedSandboxRow(teamId, at, {
        id: `sbx_bench${String(i).padStart(6, "0")}`,
        name: `bench-${i}`,
        status: STATUSES[i % STATUSES.length],
        labels: { app: `app-${i % 10}` },
      }),
    );
  }
  await store.close();
  const seedMs = performance.now() - seedStart;

  const executablePath = execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  const overview = [];
  const table = [];
  for (let r = 0; r < RUNS; r++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript((k) => sessionStorage.setItem("sandtree.api_key", k), key);
    const page = await context.newPage();
    let t0 = performance.now();
    await page.goto(`${server.url}/`);
    await page.locator("#card-created").waitFor();
    overview.push(performance.now() - t0);
    const created = await page.locator("#card-created").textContent();
    if (created.replace(/,/g, "") !== String(ROWS)) throw new Error(`the card says ${created} sandboxes, not ${ROWS}`);
    t0 = performance.now();
    await page.goto(`${server.url}/#/sandboxes`);
    await page.locator("#sandbox-table tbody tr").nth(49).waitFor();
    table.push(performance.now() - t0);
    await context.close();
  }

  // The two API calls behind those pages, timed alone.
  const timed = async (url) => {
    const xs = [];
    for (let r = 0; r < RUNS; r++) {
      const t0 = performance.now();
      const res = await fetch(server.url + url, { headers: { authorization: `Bearer ${key}` } });
      await res.arrayBuffer();
      xs.push(performance.now() - t0);
    }
    return stats(xs);
  };
  const apiStats = await timed("/v1/stats?window_hours=24&bucket_minutes=30");
  const apiPage = await timed("/v1/sandboxes?limit=50");

  const db = new Database(dbPath, { readonly: true });
  const count = db.prepare("SELECT count(*) AS n FROM sandboxes WHERE team_id = ?");
  const countMs = [];
  let n = 0;
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    n = count.get(teamId).n;
    countMs.push(performance.now() - t0);
  }
  db.close();
  const countStats = stats(countMs);
  const out = {
    bench: "dashboard",
    accel,
    rows: ROWS,
    seed_ms: +seedMs.toFixed(0),
    dashboard_overview_first_load: stats(overview),
    dashboard_sandboxes_first_page: stats(table),
    api_stats: apiStats,
    api_sandboxes_first_page: apiPage,
    select_count: { ...countStats, rows_counted: n },
    overview_vs_select_count_p50: ratio(pct(overview, 50), pct(countMs, 50)),
    floor,
    note: "overview: / to the cards drawn (GET /v1/stats over all rows); sandboxes: #/sandboxes to 50 rows drawn (one cursor page); fresh browser context per run",
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await browser?.close();
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
