// The hourly rollup of meter records (store/usage-hours.ts): what its migration backfills from the
// records already there equals what its triggers kept as the records were written and closed, on
// SQLite and on a real PostgreSQL (postgres-server.ts, stopped by PID). The sums it answers are
// compared with the JavaScript arithmetic in usage-sql.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgStore, SqliteStore } from "../src/index.js";
import type { MeterKind, MeterRecord } from "../src/store/rows.js";
import type { Store } from "../src/store/store.js";
import { type PgServer, startPostgres } from "./postgres-server.js";

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 2, 5, 17, 3, 250);
const KINDS: MeterKind[] = ["sandbox", "checkpoint", "volume", "upload"];

/** 400 records of two teams: spans from nothing to days, on and off the hour, some open. */
async function seed(store: Store): Promise<void> {
  const teams = [(await store.createTeam("ra")).id, (await store.createTeam("rb")).id];
  const records: Array<Omit<MeterRecord, "id">> = [];
  for (let i = 0; i < 400; i++) {
    const kind = KINDS[i % 4] as MeterKind;
    const start = T0 + ((i * 7919) % (96 * 60)) * 60_000 - (i % 5 === 0 ? T0 % H : 0);
    const len = [0, 1, 59 * 60_000, H, 3 * H + 17, 50 * H][i % 6] as number;
    records.push({
      kind,
      subject_id: `s${i % 37}`,
      sandbox_id: kind === "volume" ? "" : `sb${i % 37}`,
      team_id: teams[i % 2] as string,
      state: "RUNNING",
      vcpus: kind === "sandbox" ? 1 + (i % 4) : 0,
      memory_gib: kind === "sandbox" ? 0.3 * (1 + (i % 8)) : 0,
      disk_gib: 1 + (i % 10),
      stored_bytes: kind === "sandbox" ? 0 : (i * 104_729) % 5_000_000_000,
      start_ms: start,
      end_ms: kind === "upload" ? start : i % 9 === 0 ? null : start + len,
    });
  }
  await store.insertMeterRecords(records);
}

/** The rollup, sorted, as rows of numbers (team ids replaced by their order). */
type Rollup = Array<Record<string, unknown>>;
const ORDER = "ORDER BY team_id, kb, ka";

function expectSame(got: Rollup, want: Rollup): void {
  expect(got.length).toBe(want.length);
  expect(got.length).toBeGreaterThan(50);
  for (const [i, w] of want.entries()) {
    const g = got[i] as Record<string, unknown>;
    for (const [k, v] of Object.entries(w)) {
      if (typeof v === "number") {
        const x = Number(g[k]);
        if (Math.abs(x - v) > 1e-9 * Math.max(1, Math.abs(v))) expect.fail(`row ${i} ${k}: ${x} != ${v}`);
      } else expect(g[k]).toEqual(v);
    }
  }
}

const CLOSE = "UPDATE meter_records SET end_ms = start_ms + (id % 5) * 1800001 WHERE end_ms IS NULL AND id % 3 <> 0";

describe("the hourly rollup's backfill equals its triggers", () => {
  let dir = "";
  let server: PgServer | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sandtree-usage-rollup-"));
    server = await startPostgres();
    await server.createDatabase("rollup");
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("on SQLite", async () => {
    const file = path.join(dir, "r.db");
    const store = new SqliteStore(file);
    await seed(store);
    await store.close();
    const db = new Database(file);
    db.exec(CLOSE);
    const kept = db.prepare(`SELECT * FROM meter_hours ${ORDER}`).all() as Rollup;
    db.exec(`DROP TRIGGER meter_hours_insert; DROP TRIGGER meter_hours_close; DROP TABLE meter_hours;
      DROP INDEX meter_records_start; DELETE FROM schema_migrations WHERE name IN ('0019-meter-hours', '0023-meter-hours-clustered')`);
    db.close();
    await new SqliteStore(file).close(); // migrates again: the backfill, then the copy into key order
    const ro = new Database(file, { readonly: true });
    expect(ro.prepare("SELECT sql FROM sqlite_master WHERE name = 'meter_hours'").pluck().get()).toMatch(/WITHOUT ROWID$/);
    expectSame(ro.prepare(`SELECT * FROM meter_hours ${ORDER}`).all() as Rollup, kept);
    ro.close();
  });

  it("on PostgreSQL", async () => {
    const url = await (server as PgServer).createSchema("rollup", "r1");
    const store = await PgStore.open(url, { poolSize: 2 });
    await seed(store);
    await store.close();
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query(CLOSE);
      const kept = (await db.query(`SELECT * FROM meter_hours ${ORDER}`)).rows as Rollup;
      await db.query(`DROP TABLE meter_hours; DROP FUNCTION meter_hours_add() CASCADE; DROP INDEX meter_records_start;
        DELETE FROM schema_migrations WHERE name = '0013-meter-hours'`);
      await (await PgStore.open(url, { poolSize: 1 })).close(); // migrates again: the backfill
      expectSame((await db.query(`SELECT * FROM meter_hours ${ORDER}`)).rows as Rollup, kept);
    } finally {
      await db.end();
    }
  });
});
