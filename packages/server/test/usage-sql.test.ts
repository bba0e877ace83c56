// Usage added up by the database (store/usage-sums.ts, priced by usage-pricing.ts) against the
// JavaScript arithmetic it replaced (metering-oracle.ts), on random record sets: every grouping,
// random windows cut inside spans, price changes at random instants, open records, uploads,
// checkpoints, labels and sandboxes gone, records closed after they were written (the hourly
// rollup's close trigger, store/usage-hours.ts). On SQLite (a temporary file) and on a real PostgreSQL
// (postgres-server.ts, stopped by PID). Amounts must agree to 1e-9 (relative above 1).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { UsageAmounts, UsageGroup } from "@sandtree/protocol";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, PgStore, SqliteStore } from "../src/index.js";
import { MeteringService } from "../src/services/metering/metering-service.js";
import { compilePrices, type PriceEntry } from "../src/services/metering/prices.js";
import type { MeterKind, MeterRecord } from "../src/store/rows.js";
import type { Store } from "../src/store/store.js";
import { costBySubject, usageLines } from "./metering-oracle.js";
import { type PgServer, startPostgres } from "./postgres-server.js";
import { sandboxRow } from "./store/fixtures.js";

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 2, 5, 17, 3, 250);
const GiB = 1024 ** 3;
const GROUPS: UsageGroup[] = ["day", "hour", "sandbox", "team", "label"];

/** A small deterministic generator (mulberry32), so a failure can be replayed by its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function close(got: number, want: number, what: string): void {
  if (Math.abs(got - want) > 1e-9 * Math.max(1, Math.abs(want))) expect.fail(`${what}: ${got} != ${want}`);
}

function closeAmounts(got: UsageAmounts, want: UsageAmounts, what: string): void {
  for (const k of [
    "vcpu_seconds",
    "memory_gib_seconds",
    "disk_gib_seconds",
    "checkpoint_gib_hours",
    "volume_gib_hours",
    "cost_usd",
  ] as const)
    close(got[k], want[k], `${what} ${k}`);
}

function randomPrices(r: () => number): PriceEntry[] {
  const n = 1 + Math.floor(r() * 3);
  return Array.from({ length: n }, (_, i) => ({
    effective_from: new Date(i === 0 ? 0 : T0 + Math.floor((r() - 0.3) * 60 * H)).toISOString(),
    vcpu_hour_usd: +(r() * 0.1).toFixed(5),
    memory_gib_hour_usd: +(r() * 0.05).toFixed(5),
    disk_gib_hour_usd: +(r() * 0.001).toFixed(6),
    checkpoint_gib_month_usd: +(r() * 0.5).toFixed(4),
    volume_gib_month_usd: +(r() * 0.3).toFixed(4),
  }));
}

/** Sandboxes (some with labels, some never stored) and 300 records of two teams around T0. */
async function seed(store: Store, r: () => number): Promise<string[]> {
  const teams = [
    (await store.createTeam(`a${Math.floor(r() * 1e9)}`)).id,
    (await store.createTeam(`b${Math.floor(r() * 1e9)}`)).id,
  ];
  const ids: string[] = [];
  for (let i = 0; i < 24; i++) {
    const id = `sb-r${i}-${Math.floor(r() * 1e9)}`;
    ids.push(id);
    if (i % 6 === 5) continue; // gone: records without a sandbox row
    const labels: Record<string, string> = {};
    if (r() < 0.7) labels.project = `p${Math.floor(r() * 3)}`;
    if (r() < 0.4) labels.env = r() < 0.5 ? "prod" : "dev,x";
    const at = new Date(T0).toISOString();
    await store.insertSandbox(
      sandboxRow(teams[i % 2] as string, {
        id,
        status: "TERMINATED",
        memory_gb: 1,
        disk_size_gb: 1,
        labels,
        created_at: at,
        updated_at: at,
        started_at: at,
        terminated_at: at,
      }),
    );
  }
  const records: Array<Omit<MeterRecord, "id">> = [];
  for (let i = 0; i < 300; i++) {
    const k = Math.floor(r() * ids.length);
    const sandbox = ids[k] as string;
    const roll = r();
    const kind: MeterKind = roll < 0.6 ? "sandbox" : roll < 0.75 ? "checkpoint" : roll < 0.87 ? "volume" : "upload";
    // Some on the hour (bucket edges); mostly minutes to hours, some days long, some open, some empty.
    const onHour = r() < 0.2;
    const raw = T0 + Math.floor((r() - 0.5) * 72 * H);
    const start = onHour ? Math.floor(raw / H) * H : raw;
    const len =
      r() < 0.1 ? 0 : r() < 0.15 ? Math.floor(r() * 80 * H) : onHour ? Math.floor(r() * 3) * H : Math.floor(r() * 3 * H);
    const end = kind === "upload" ? start : r() < 0.1 ? null : start + len;
    const bytes = Math.floor(r() * 5 * GiB);
    records.push({
      kind,
      subject_id: kind === "sandbox" ? sandbox : kind === "volume" ? `vol-${Math.floor(r() * 5)}` : `ck-${Math.floor(r() * 20)}`,
      // A volume bills to no sandbox.
      sandbox_id: kind === "volume" ? "" : sandbox,
      team_id: teams[k % 2] as string,
      state: kind === "sandbox" ? "RUNNING" : kind === "volume" ? "READY" : "DURABLE",
      vcpus: kind === "sandbox" ? Math.floor(r() * 8) : 0,
      memory_gib: kind === "sandbox" ? Math.floor(r() * 64) / 8 + (r() < 0.2 ? r() : 0) : 0,
      disk_gib: kind === "sandbox" ? 1 + Math.floor(r() * 20) : bytes / GiB,
      stored_bytes: kind === "sandbox" ? 0 : bytes,
      start_ms: start,
      end_ms: end,
    });
  }
  await store.insertMeterRecords(records);
  return teams;
}

/** One random case: a record set, a price table, a clock, then every grouping on random windows. */
async function compare(store: Store, seedNo: number, exec: (sql: string) => Promise<unknown>): Promise<void> {
  const r = rng(seedNo);
  const teams = await seed(store, r);
  // Half the open records close later, by the UPDATE the stores make (the rollup's close trigger).
  await exec("UPDATE meter_records SET end_ms = start_ms + (id % 7) * 1234567 + 1 WHERE end_ms IS NULL AND id % 2 = 0");
  const priceTable = randomPrices(r);
  const prices = compilePrices(priceTable);
  const clock = new ManualClock(T0 + Math.floor((r() - 0.3) * 48 * H));
  const metering = new MeteringService(store, clock, priceTable);
  const nowMs = clock.now();
  // Edges that records start or end on: a window from an upload's instant, one to a price change.
  const seeded = await store.listMeterRecords({ fromMs: -1e15, toMs: 1e15 });
  const upload = seeded.find((x) => x.kind === "upload")?.start_ms ?? T0;
  const change = prices.at(-1)?.fromMs ?? T0;
  for (let w = 0; w < 5; w++) {
    // Window 3: over 2,000 hours (SQLite's pieces give way to the general statement for hours).
    const fromMs = [T0 - 40 * H, upload, change - 30 * H, T0 - 2100 * H][w] ?? T0 + Math.floor((r() - 0.6) * 60 * H);
    const toMs = w === 0 || w === 3 ? T0 + 40 * H : w === 2 ? change : fromMs + 1 + Math.floor(r() * 50 * H);
    for (const scope of [{ teamId: teams[0] as string }, { allTeams: true as const }]) {
      const teamId = "teamId" in scope ? scope.teamId : undefined;
      for (const group of GROUPS) {
        for (const labelKey of group === "label" ? [undefined, "project", "env"] : [undefined]) {
          const what = `seed ${seedNo} window ${w} ${teamId ? "team" : "all"} ${group} ${labelKey ?? ""}`;
          const got = await metering.usage(scope, {
            from: new Date(fromMs).toISOString(),
            to: new Date(toMs).toISOString(),
            group_by: group,
            label_key: labelKey,
          });
          const records = await store.listMeterRecords({ ...(teamId ? { teamId } : {}), fromMs, toMs, withLabels: true });
          const want = usageLines({ records, prices, fromMs, toMs, nowMs, group, labelKey });
          expect(
            got.lines.map((l) => l.key),
            what,
          ).toEqual(want.lines.map((l) => l.key));
          for (const [i, l] of want.lines.entries()) closeAmounts(got.lines[i] as UsageAmounts, l, `${what} ${l.key}`);
          closeAmounts(got.total, want.total, `${what} total`);
        }
      }
      const cost = await metering.costBetween(scope, fromMs, toMs);
      const records = await store.listMeterRecords({ ...(teamId ? { teamId } : {}), fromMs, toMs });
      close(cost, usageLines({ records, prices, fromMs, toMs, nowMs, group: "team" }).total.cost_usd, `seed ${seedNo} cost`);
    }
  }
  // The objects' own cost_usd: every record of the subject, open ones up to now.
  const all = await store.listMeterRecords({ fromMs: -1e15, toMs: 1e15 });
  for (const subject of ["sandbox", "checkpoint"] as const) {
    const kinds = subject === "sandbox" ? ["sandbox"] : ["checkpoint", "upload"];
    const ids = [...new Set(all.filter((x) => kinds.includes(x.kind)).map((x) => x.subject_id))];
    const got = await metering.costsOf(subject, [...ids, "sb-none"]);
    const want = costBySubject(
      all.filter((x) => kinds.includes(x.kind)),
      prices,
      nowMs,
    );
    expect([...got.keys()].sort(), `seed ${seedNo} ${subject} costs`).toEqual([...want.keys()].sort());
    for (const [id, usd] of want) close(got.get(id) ?? Number.NaN, usd, `seed ${seedNo} ${subject} ${id}`);
  }
}

describe("usage sums on SQLite equal the JavaScript arithmetic", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "sandtree-usage-sql-"));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  for (const seedNo of [1, 2, 3, 4]) {
    it(`on random records (seed ${seedNo})`, async () => {
      const file = path.join(dir, `s${seedNo}.db`);
      const store = new SqliteStore(file);
      const db = new Database(file);
      try {
        await compare(store, seedNo, async (sql) => db.exec(sql));
      } finally {
        db.close();
        await store.close();
      }
    });
  }
});

describe("usage sums on PostgreSQL equal the JavaScript arithmetic", () => {
  let server: PgServer | undefined;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase("usage");
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });
  for (const seedNo of [1, 2, 3, 4]) {
    it(`on random records (seed ${seedNo})`, async () => {
      const schemaUrl = await (server as PgServer).createSchema("usage", `s${seedNo}`);
      const store = await PgStore.open(schemaUrl, { poolSize: 2 });
      const db = new pg.Client({ connectionString: schemaUrl });
      await db.connect();
      try {
        await compare(store, seedNo, (sql) => db.query(sql));
      } finally {
        await db.end();
        await store.close();
      }
    });
  }
});
