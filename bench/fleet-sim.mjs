#!/usr/bin/env node
// Fleet mode at scale, without VMs: `sandtree serve` (a temp data dir, its SQLite store) with
// 1,000 simulated worker hosts that speak the worker protocol (register with the join token,
// heartbeat with their secret) but start nothing. The hosts are multiplexed over a few child
// processes (1,000 processes do not fit a 2-core machine), each keeping its connections alive.
// Then placements through POST /v1/fleet/placements (placement decision + record, no VM start)
// until 20,000 are live, while every host keeps heartbeating: placements per second, the call's
// p50/p99, and the API's latency at that load (GET /v1/hosts, a placement). Beside them, in the
// same run: the store's plain insert rate (one autocommit INSERT per row, the same pragmas) and
// HostStore.place in-process (no HTTP), and the floor (bare QEMU, raw-floor.py) as every bench.
// `--database postgres` runs it all on a throwaway PostgreSQL (scripts/lib/postgres.mjs, default
// durability) instead of SQLite, `--database postgres://...` on an empty database of your own.
// Usage: node bench/fleet-sim.mjs [--hosts 1000] [--sandboxes 20000] [--procs 4]
// [--concurrency 16] [--heartbeat-ms 5000] [--database sqlite|postgres|URL] [--no-floor].
// Prints one JSON document.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { PgStore, SqliteStore } from "@sandtree/server";
import Database from "better-sqlite3";
import pg from "pg";
import { startPostgres } from "../scripts/lib/postgres.mjs";
import { measureFloor } from "./lib/floor.mjs";

const here = fileURLToPath(import.meta.url);
const repo = path.resolve(path.dirname(here), "..");
const { values } = parseArgs({
  options: {
    role: { type: "string", default: "main" },
    url: { type: "string" },
    token: { type: "string" },
    from: { type: "string", default: "0" },
    count: { type: "string", default: "0" },
    hosts: { type: "string", default: "1000" },
    sandboxes: { type: "string", default: "20000" },
    procs: { type: "string", default: "4" },
    concurrency: { type: "string", default: "16" },
    "heartbeat-ms": { type: "string", default: "5000" },
    database: { type: "string", default: "sqlite" },
    "no-floor": { type: "boolean", default: false },
  },
});

const IMAGES = Array.from({ length: 20 }, (_, i) => `sha256:${String(i).padStart(64, "0")}`);
const TEMPLATES = Array.from({ length: 8 }, (_, i) => `tpl-${i}`);
const LAYERS = Array.from({ length: 200 }, (_, i) => `layer-${i}`);
/** A deterministic pseudo-random stream (the same fleet every run). */
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}
const pick = (r, xs) => xs[Math.floor(r() * xs.length)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const ms = (x) => +x.toFixed(3);
const lat = (xs) => ({ n: xs.length, p50_ms: ms(pct(xs, 50)), p99_ms: ms(pct(xs, 99)), max_ms: ms(Math.max(...xs)) });

// node:http with keep-alive rather than fetch: the callers share the 2 cores with the server, and
// undici's per-request cost would be measured as the control plane's.
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(url, token, body) {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(data),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
        });
        res.on("end", () => {
          try {
            const json = JSON.parse(text);
            if (res.statusCode >= 400) reject(new Error(`${url}: ${res.statusCode} ${json.code} ${json.message}`));
            else resolve(json);
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** A child: `count` simulated hosts from `from`, registered, then heartbeating until killed. */
async function workers() {
  const from = Number(values.from);
  const count = Number(values.count);
  const r = rng(from + 7);
  const hosts = [];
  const t0 = performance.now();
  for (let i = from; i < from + count; i++) {
    const body = {
      name: `sim-${String(i).padStart(4, "0")}`,
      capacity: {
        vcpus: 16 + 16 * Math.floor(r() * 4),
        memory_mib: 65_536 * (1 + Math.floor(r() * 4)),
        disk_gib: 2000,
        accel: "kvm",
      },
      locality: {
        images: IMAGES.filter(() => r() < 0.2),
        templates: TEMPLATES.filter(() => r() < 0.25),
        layers: LAYERS.filter(() => r() < 0.02),
      },
    };
    const joined = await post(`${values.url}/v1/fleet/hosts/register`, values.token, body);
    hosts.push(joined);
  }
  process.stdout.write(`${JSON.stringify({ registered: hosts.length, register_ms: ms(performance.now() - t0) })}\n`);
  let beats = 0;
  let failures = 0;
  const every = Number(values["heartbeat-ms"]);
  hosts.forEach((h, i) => {
    const beat = () =>
      post(`${values.url}/v1/fleet/hosts/${h.host_id}/heartbeat`, h.secret, {}).then(
        () => beats++,
        (err) => {
          // The first failure says why (the rest are counted).
          if (failures++ === 0) process.stderr.write(`first heartbeat failure: ${err.message}\n`);
        },
      );
    // Spread over the interval so the control plane sees a steady rate, not bursts: the first beat
    // at the host's offset, then one per interval.
    setTimeout(
      () => {
        beat();
        setInterval(beat, every);
      },
      (every * i) / hosts.length,
    );
  });
  setInterval(() => process.stdout.write(`${JSON.stringify({ beats, failures })}\n`), 1000);
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(rest[11]) + Number(rest[12])) / 100; // utime, stime in clock ticks (100/s)
  } catch {
    return Number.NaN;
  }
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const BASE_HOST = {
  id: "host_base",
  name: "base",
  capacity: { vcpus: 1e5, memory_mib: 1 << 30, disk_gib: 1 << 30, accel: "kvm" },
  locality: { images: [], templates: [], layers: [] },
  secret_hash: "x",
};

/** HostStore.place in-process, `conc` in flight (as the server's callers), rows per second. */
async function placeRate(hosts, n, conc) {
  const at = new Date().toISOString();
  let next = 0;
  const t = performance.now();
  const one = async () => {
    while (next < n) {
      const i = next++;
      await hosts.place(
        { sandbox_id: `sb-${i}`, host_id: "host_base", vcpus: 2, memory_mib: 2048, disk_gib: 10, placed_at: at },
        { freshSince: at },
      );
    }
  };
  await Promise.all(Array.from({ length: conc }, one));
  return n / ((performance.now() - t) / 1000);
}

/**
 * The same on PostgreSQL, in a schema of its own on the bench's database: plain autocommit INSERTs
 * from `conc` connections, then HostStore.place through a PgStore.
 */
async function pgBaseline(url, n, conc) {
  const schema = "sandtree_bench_baseline";
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
  const scoped = `${url}${url.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  try {
    const store = await PgStore.open(scoped);
    const hosts = store.hostStore();
    await hosts.registerHost({ ...BASE_HOST, at: new Date().toISOString() });
    const pool = new pg.Pool({ connectionString: scoped, max: conc });
    await pool.query(
      "CREATE TABLE plain (sandbox_id TEXT PRIMARY KEY, host_id TEXT NOT NULL, vcpus INTEGER, memory_mib BIGINT, disk_gib BIGINT, placed_at TEXT)",
    );
    let next = 0;
    let t = performance.now();
    const ins = async () => {
      while (next < n) {
        const i = next++;
        await pool.query("INSERT INTO plain VALUES ($1, $2, $3, $4, $5, $6)", [
          `sb-${i}`,
          "host_base",
          2,
          2048,
          10,
          new Date().toISOString(),
        ]);
      }
    };
    await Promise.all(Array.from({ length: conc }, ins));
    const plain = n / ((performance.now() - t) / 1000);
    await pool.end();
    t = performance.now();
    const place = await placeRate(hosts, n, conc);
    await store.close();
    return { rows: n, concurrency: conc, plain_insert_per_s: Math.round(plain), host_store_place_per_s: Math.round(place) };
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await admin.end();
  }
}

/** The store's own rates on a fresh database: plain autocommit INSERTs, then HostStore.place. */
async function storeBaseline(work, n) {
  const file = path.join(work, "baseline.db");
  const store = new SqliteStore(file);
  const hosts = store.hostStore();
  await hosts.registerHost({
    id: "host_base",
    name: "base",
    capacity: { vcpus: 1e5, memory_mib: 1 << 30, disk_gib: 1 << 30, accel: "kvm" },
    locality: { images: [], templates: [], layers: [] },
    secret_hash: "x",
    at: new Date().toISOString(),
  });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(
    "CREATE TABLE plain (sandbox_id TEXT PRIMARY KEY, host_id TEXT NOT NULL, vcpus INTEGER, memory_mib INTEGER, disk_gib INTEGER, placed_at TEXT)",
  );
  const ins = db.prepare("INSERT INTO plain VALUES (?, ?, ?, ?, ?, ?)");
  let t = performance.now();
  for (let i = 0; i < n; i++) ins.run(`sb-${i}`, "host_base", 2, 2048, 10, new Date().toISOString());
  const plain = n / ((performance.now() - t) / 1000);
  db.close();
  t = performance.now();
  const at = new Date().toISOString();
  for (let i = 0; i < n; i++) {
    await hosts.place(
      { sandbox_id: `sb-${i}`, host_id: "host_base", vcpus: 2, memory_mib: 2048, disk_gib: 10, placed_at: at },
      { freshSince: at },
    );
  }
  const place = n / ((performance.now() - t) / 1000);
  await store.close();
  return { rows: n, plain_insert_per_s: Math.round(plain), host_store_place_per_s: Math.round(place) };
}

async function main() {
  const HOSTS = Number(values.hosts);
  const TARGET = Number(values.sandboxes);
  const PROCS = Number(values.procs);
  const CONC = Number(values.concurrency);
  const loadBefore = loadavg()[0];
  const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-fleet-"));
  const dataDir = path.join(work, "data");
  const port = await freePort();
  const children = [];
  const stopAll = () => {
    for (const c of children) if (c.exitCode === null) c.kill("SIGTERM");
  };
  process.on("exit", stopAll);
  const backend = values.database === "sqlite" ? "sqlite" : "postgres";
  let cluster = null;
  let dbUrl = null;
  if (values.database === "postgres") {
    cluster = await startPostgres({ durable: true });
    dbUrl = cluster.url("postgres");
  } else if (backend === "postgres") dbUrl = values.database;
  try {
    const serve = spawn(
      process.execPath,
      [
        path.join(repo, "packages/cli/dist/main.js"),
        "serve",
        "--data-dir",
        dataDir,
        "--port",
        String(port),
        ...(dbUrl ? ["--database", dbUrl] : []),
      ],
      {
        env: {
          ...process.env,
          SANDTREE_NETWORK: "off",
          SANDTREE_LOG_LEVEL: "warn",
          SANDTREE_LOG_FORMAT: "json",
          SANDTREE_HEARTBEAT_INTERVAL_MS: values["heartbeat-ms"],
        },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    children.push(serve);
    let serveOut = "";
    await new Promise((resolve, reject) => {
      serve.stdout.on("data", (d) => {
        serveOut += d;
        if (serveOut.includes("sandtree worker --join")) resolve();
      });
      serve.on("close", (code) => reject(new Error(`serve exited ${code}: ${serveOut.slice(-500)}`)));
    });
    const url = `http://127.0.0.1:${port}`;
    const key = /SANDTREE_API_KEY=(\S+)/.exec(readFileSync(path.join(dataDir, "credentials.env"), "utf8"))[1];
    const token = readFileSync(path.join(dataDir, "join-token"), "utf8").trim();
    // The local host is this machine: out of the simulation (on PostgreSQL it is `local-<id>`).
    const localName = dbUrl ? readFileSync(path.join(dataDir, "local-host-name"), "utf8").trim() : "local";
    await post(`${url}/v1/hosts/${localName}/cordon`, key, {});

    const per = Math.ceil(HOSTS / PROCS);
    const sims = [];
    const regT0 = performance.now();
    for (let p = 0; p < PROCS; p++) {
      const count = Math.min(per, HOSTS - p * per);
      const child = spawn(
        process.execPath,
        [
          here,
          "--role",
          "workers",
          "--url",
          url,
          "--token",
          token,
          "--from",
          String(p * per),
          "--count",
          String(count),
          "--heartbeat-ms",
          values["heartbeat-ms"],
        ],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      children.push(child);
      const sim = { child, last: { beats: 0, failures: 0 }, registered: null };
      child.stdout.setEncoding("utf8").on("data", (d) => {
        for (const line of d.split("\n").filter(Boolean)) {
          const m = JSON.parse(line);
          if (m.registered !== undefined) sim.registered = m;
          else sim.last = m;
        }
      });
      sims.push(sim);
    }
    while (sims.some((s) => !s.registered)) await new Promise((r) => setTimeout(r, 100));
    const registerS = (performance.now() - regT0) / 1000;
    // One interval for every host to be beating at its steady rate before placements start.
    await new Promise((r) => setTimeout(r, Number(values["heartbeat-ms"])));
    const beatsAt = () =>
      sims.reduce((a, s) => ({ beats: a.beats + s.last.beats, failures: a.failures + s.last.failures }), {
        beats: 0,
        failures: 0,
      });

    // Placements: CONC callers in flight until TARGET are live.
    const r = rng(42);
    const latencies = [];
    const windows = [];
    let next = 0;
    let refused = 0;
    const beats0 = beatsAt();
    const cpu0 = {
      serve: cpuSeconds(serve.pid),
      sims: sims.reduce((a, x) => a + cpuSeconds(x.child.pid), 0),
      self: process.cpuUsage(),
    };
    const t0 = performance.now();
    let wT = t0;
    const caller = async () => {
      while (next < TARGET) {
        const i = next++;
        const body = {
          sandbox_id: `sb-sim-${i}`,
          vcpus: 1 + Math.floor(r() * 2),
          memory_mib: 1024 * (1 + Math.floor(r() * 4)),
          disk_gib: 10,
          image_digest: pick(r, IMAGES),
          ...(r() < 0.5 ? { template_key: pick(r, TEMPLATES) } : {}),
          ...(r() < 0.3 ? { layers: [pick(r, LAYERS), pick(r, LAYERS)] } : {}),
        };
        const s = performance.now();
        try {
          await post(`${url}/v1/fleet/placements`, key, body);
        } catch {
          refused++;
        }
        latencies.push(performance.now() - s);
        if ((i + 1) % 5000 === 0) {
          const now = performance.now();
          windows.push({ live: i + 1, per_s: Math.round(5000 / ((now - wT) / 1000)) });
          wT = now;
        }
      }
    };
    await Promise.all(Array.from({ length: CONC }, caller));
    const placeS = (performance.now() - t0) / 1000;
    const beats1 = beatsAt();
    const selfCpu = process.cpuUsage(cpu0.self);
    const cpu = {
      serve_s: +(cpuSeconds(serve.pid) - cpu0.serve).toFixed(2),
      simulated_hosts_s: +(sims.reduce((a, x) => a + cpuSeconds(x.child.pid), 0) - cpu0.sims).toFixed(2),
      callers_s: +((selfCpu.user + selfCpu.system) / 1e6).toFixed(2),
    };

    // The API at 20,000 live placements (heartbeats still running).
    const listLat = [];
    for (let i = 0; i < 20; i++) {
      const s = performance.now();
      const res = await fetch(`${url}/v1/hosts`, { headers: { authorization: `Bearer ${key}` } });
      await res.json();
      listLat.push(performance.now() - s);
    }
    const oneLat = [];
    for (let i = 0; i < 200; i++) {
      const s = performance.now();
      await post(`${url}/v1/fleet/placements`, key, {
        sandbox_id: `sb-probe-${i}`,
        vcpus: 1,
        memory_mib: 1024,
        disk_gib: 10,
        image_digest: IMAGES[0],
      });
      oneLat.push(performance.now() - s);
    }
    const hostsNow = (await (await fetch(`${url}/v1/hosts`, { headers: { authorization: `Bearer ${key}` } })).json()).hosts;
    const live = hostsNow.reduce((a, h) => a + h.usage.placements, 0);
    const loadAfter = loadavg()[0];
    stopAll();

    const baseline = dbUrl ? await pgBaseline(dbUrl, TARGET, CONC) : await storeBaseline(work, TARGET);
    const floor = values["no-floor"] ? { skipped: "--no-floor" } : await measureFloor(await detectAccel("auto"));
    const doc = {
      bench: "fleet-sim",
      what: `placement decision + record, no VM start: POST /v1/fleet/placements against \`sandtree serve\` (${backend}) while every simulated host heartbeats`,
      store:
        backend === "sqlite"
          ? "sqlite (WAL, synchronous=NORMAL)"
          : "postgresql (fsync and synchronous_commit as configured; the throwaway cluster keeps the defaults)",
      // Other work on the machine shares its cores: the 1-minute load average before and after.
      machine: { cpus: cpus().length, loadavg_1m_before: +loadBefore.toFixed(2), loadavg_1m_after: +loadAfter.toFixed(2) },
      hosts: HOSTS,
      worker_processes: PROCS,
      note: `${HOSTS} simulated hosts multiplexed over ${PROCS} child processes with keep-alive connections (${HOSTS} processes do not fit ${cpus().length} cores); they register and heartbeat but start nothing`,
      register: { hosts: sims.reduce((a, s) => a + s.registered.registered, 0), seconds: +registerS.toFixed(2) },
      placements: {
        target: TARGET,
        concurrency: CONC,
        refused,
        per_s: Math.round(TARGET / placeS),
        seconds: +placeS.toFixed(2),
        latency: lat(latencies),
        by_window: windows,
        // CPU used during the placements: the control plane's per placement (heartbeats included)
        // does not depend on what else the machine runs, unlike the rate.
        cpu_seconds: cpu,
        serve_cpu_ms_per_placement: +((cpu.serve_s * 1000) / TARGET).toFixed(3),
      },
      heartbeats_during_placement: {
        interval_ms: Number(values["heartbeat-ms"]),
        per_s: Math.round((beats1.beats - beats0.beats) / placeS),
        failures: beats1.failures - beats0.failures,
      },
      api_at_live: {
        live_placements: live,
        get_hosts: lat(listLat),
        one_placement: lat(oneLat),
      },
      store_same_run: baseline,
      floor,
    };
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
  } finally {
    stopAll();
    await cluster?.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (values.role === "workers") await workers();
else await main();
