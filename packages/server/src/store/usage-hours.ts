import { type OpenGroup, openRows, openSql } from "./usage-open.js";
import { type UsageSumRow, type UsageSumsQuery, usageSumsSql } from "./usage-sums.js";

// The hourly rollup of closed meter records: one row per team and pair of UTC hours (the hour a
// record starts in, ka, and the hour it ends in, kb), holding the same sums as a usage-sums row
// (usage-sums.ts) with hour buckets. Database triggers add a record to it when it is written
// closed or when it closes, in the same transaction (a crash loses or doubles nothing; the table
// is append-only, the only update is closing). A usage report without a per-record key (by day,
// hour, team; the cost behind /metrics and the budget check) then reads the rollup's rows of the
// window, a few per hour, plus the records the rollup cannot answer: open records (added up per
// start hour, usage-open.ts), and those starting or ending in an hour that a window or price edge
// cuts (plain index ranges).

export const HOUR_MS = 3_600_000;

const SUMS = [
  "head_vcpu_ms",
  "head_memory_ms",
  "head_disk_ms",
  "head_bytes_ms",
  "head_volume_ms",
  "tail_vcpu_ms",
  "tail_memory_ms",
  "tail_disk_ms",
  "tail_bytes_ms",
  "tail_volume_ms",
  "vcpus",
  "memory_gib",
  "disk_gib",
  "stored_bytes",
  "volume_bytes",
  "upload_bytes",
] as const;
type Sum = (typeof SUMS)[number];

type Dialect = "sqlite" | "pg";

/** The rollup row of record `r` (NEW in a trigger, m in the backfill): the same arithmetic as usage-sums.ts. */
function rowOf(d: Dialect, r: string): Record<"team_id" | "ka" | "kb" | "n" | Sum, string> {
  const least = d === "pg" ? "LEAST" : "min";
  const float = (x: string) => (d === "pg" ? `${x}::double precision` : `(${x} * 1.0)`);
  const ka = `(${r}.start_ms / ${HOUR_MS})`;
  const kb = `(CASE WHEN ${r}.kind = 'upload' THEN ${r}.start_ms / ${HOUR_MS} ELSE (${r}.end_ms - 1) / ${HOUR_MS} END)`;
  const h = `(CASE WHEN ${r}.kind = 'upload' THEN 0 ELSE ${least}(${r}.end_ms, (${ka} + 1) * ${HOUR_MS}) - ${r}.start_ms END)`;
  const t = `(CASE WHEN ${r}.kind <> 'upload' AND ${kb} > ${ka} THEN ${r}.end_ms - ${kb} * ${HOUR_MS} ELSE 0 END)`;
  const of = (kind: string, x: string) => `(CASE WHEN ${r}.kind = '${kind}' THEN ${x} ELSE 0 END)`;
  const cv = of("sandbox", `${r}.vcpus`);
  const cm = of("sandbox", `${r}.memory_gib`);
  const cd = of("sandbox", `${r}.disk_gib`);
  const cb = of("checkpoint", float(`${r}.stored_bytes`));
  const cw = of("volume", float(`${r}.stored_bytes`));
  return {
    team_id: `${r}.team_id`,
    ka,
    kb,
    n: "1",
    head_vcpu_ms: `${cv} * ${h}`,
    head_memory_ms: `${cm} * ${h}`,
    head_disk_ms: `${cd} * ${h}`,
    head_bytes_ms: `${cb} * ${h}`,
    head_volume_ms: `${cw} * ${h}`,
    tail_vcpu_ms: `${cv} * ${t}`,
    tail_memory_ms: `${cm} * ${t}`,
    tail_disk_ms: `${cd} * ${t}`,
    tail_bytes_ms: `${cb} * ${t}`,
    tail_volume_ms: `${cw} * ${t}`,
    vcpus: cv,
    memory_gib: cm,
    disk_gib: cd,
    stored_bytes: cb,
    volume_bytes: cw,
    upload_bytes: of("upload", float(`${r}.stored_bytes`)),
  };
}

const COLUMNS = ["team_id", "ka", "kb", "n", ...SUMS] as const;
/** What the rollup holds: closed spans, and uploads (instants). */
const ROLLED = (r: string) => `${r}.end_ms IS NOT NULL AND (${r}.kind = 'upload' OR ${r}.end_ms > ${r}.start_ms)`;

function upsert(d: Dialect): string {
  const row = rowOf(d, "NEW");
  const add = ["n", ...SUMS].map((c) => `${c} = meter_hours.${c} + excluded.${c}`).join(", ");
  return `INSERT INTO meter_hours (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map((c) => row[c]).join(", ")})
    ON CONFLICT (team_id, kb, ka) DO UPDATE SET ${add}`;
}

function backfill(d: Dialect): string {
  const row = rowOf(d, "m");
  const sum = (x: string) => (d === "pg" ? `sum(${x})` : `total(${x})`);
  const cols = COLUMNS.map((c) => (c === "n" ? "count(*)" : c === "team_id" || c === "ka" || c === "kb" ? c : sum(c)));
  return `INSERT INTO meter_hours (${COLUMNS.join(", ")})
    SELECT ${cols.join(", ")} FROM (SELECT ${COLUMNS.filter((c) => c !== "n")
      .map((c) => `${row[c]} AS ${c}`)
      .join(", ")} FROM meter_records m WHERE ${ROLLED("m")}) r
    GROUP BY team_id, ka, kb`;
}

/** The rollup table and its index; `clustered`: SQLite keeps the rows in key order (WITHOUT ROWID). */
function rollupTable(d: Dialect, clustered = false): string {
  const real = d === "pg" ? "DOUBLE PRECISION" : "REAL";
  const int = d === "pg" ? "BIGINT" : "INTEGER";
  return `CREATE TABLE meter_hours (team_id TEXT NOT NULL, ka ${int} NOT NULL, kb ${int} NOT NULL, n ${int} NOT NULL,
    ${SUMS.map((c) => `${c} ${real} NOT NULL`).join(", ")}, PRIMARY KEY (team_id, kb, ka))${clustered ? " WITHOUT ROWID" : ""};
  CREATE INDEX meter_hours_kb ON meter_hours(kb, ka)`;
}

function table(d: Dialect): string {
  return `${rollupTable(d)};
  CREATE INDEX meter_records_start ON meter_records(start_ms);`;
}

const SQLITE_TRIGGERS = `CREATE TRIGGER meter_hours_insert AFTER INSERT ON meter_records WHEN ${ROLLED("NEW")}
  BEGIN ${upsert("sqlite")}; END;
  CREATE TRIGGER meter_hours_close AFTER UPDATE OF end_ms ON meter_records WHEN OLD.end_ms IS NULL AND ${ROLLED("NEW")}
  BEGIN ${upsert("sqlite")}; END;`;

/** SQLite: the rollup, its triggers (on insert of a closed record, on closing one) and its backfill. */
export const SQLITE_METER_HOURS_MIGRATION = `${table("sqlite")};
  ${SQLITE_TRIGGERS}
  ${backfill("sqlite")};`;

/**
 * SQLite: the rollup kept in key order (WITHOUT ROWID), so a window's rows are one range of the
 * table rather than an index range and a row lookup each: the rows copied, the triggers made again.
 */
export const SQLITE_METER_HOURS_CLUSTERED_MIGRATION = `DROP TRIGGER meter_hours_insert; DROP TRIGGER meter_hours_close;
  DROP INDEX meter_hours_kb;
  ALTER TABLE meter_hours RENAME TO meter_hours_heap;
  ${rollupTable("sqlite", true)};
  INSERT INTO meter_hours (${COLUMNS.join(", ")}) SELECT ${COLUMNS.join(", ")} FROM meter_hours_heap;
  DROP TABLE meter_hours_heap;
  ${SQLITE_TRIGGERS}`;

/** PostgreSQL: the same, the triggers calling one function. */
export const PG_METER_HOURS_MIGRATION = `${table("pg")};
  CREATE FUNCTION meter_hours_add() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN ${upsert("pg")}; RETURN NULL; END $fn$;
  CREATE TRIGGER meter_hours_insert AFTER INSERT ON meter_records FOR EACH ROW WHEN (${ROLLED("NEW")})
    EXECUTE FUNCTION meter_hours_add();
  CREATE TRIGGER meter_hours_close AFTER UPDATE OF end_ms ON meter_records FOR EACH ROW
    WHEN (OLD.end_ms IS NULL AND ${ROLLED("NEW")}) EXECUTE FUNCTION meter_hours_add();
  ${backfill("pg")};`;

/** Whether a query is answered from the rollup: hour buckets, no per-record key, no subjects. */
export function rollupAnswers(q: UsageSumsQuery): boolean {
  return q.bucketMs === HOUR_MS && (q.key === "none" || q.key === "team") && q.subjects === undefined;
}

interface Segment {
  period: number;
  fromMs: number;
  toMs: number;
}

/** A statement to run; its rows' periods index `periods` (segments of the query's periods). */
export interface HourStatement {
  sql: string;
  params: unknown[];
  periods: readonly number[];
}

/** The statements behind a rollup answer: the rollup's rows of the window, open records' groups, and per cut hour two ranges. */
export function hourPlan(
  d: Dialect,
  q: UsageSumsQuery,
): { rollup: HourStatement; open: { sql: string; params: unknown[] }; raw: HourStatement[]; cuts: Map<number, Segment[]> } {
  const first = q.periods[0];
  const last = q.periods.at(-1);
  if (!first || !last) throw new Error("usage sums need at least one period");
  const cuts = new Map<number, Segment[]>();
  const cut = (hour: number, s: Segment) => {
    const list = cuts.get(hour);
    if (list) list.push(s);
    else cuts.set(hour, [s]);
  };
  q.periods.forEach((p, period) => {
    const a = Math.ceil(p.fromMs / HOUR_MS);
    const b = Math.floor(p.toMs / HOUR_MS);
    if (a > b) cut(b, { period, fromMs: p.fromMs, toMs: p.toMs });
    else {
      if (p.fromMs < a * HOUR_MS) cut(a - 1, { period, fromMs: p.fromMs, toMs: a * HOUR_MS });
      if (b * HOUR_MS < p.toMs) cut(b, { period, fromMs: b * HOUR_MS, toMs: p.toMs });
    }
  });
  const params: unknown[] = [];
  const ref = (v: unknown) => {
    params.push(v);
    return d === "pg" ? `$${params.length}` : `@p${params.length}`;
  };
  const where = [`kb >= ${ref(Math.floor(first.fromMs / HOUR_MS))}`, `ka <= ${ref(Math.floor((last.toMs - 1) / HOUR_MS))}`];
  if (q.teamId !== undefined) where.unshift(`team_id = ${ref(q.teamId)}`);
  const rollup = { sql: `SELECT ${COLUMNS.join(", ")} FROM meter_hours WHERE ${where.join(" AND ")}`, params, periods: [] };
  const raw: HourStatement[] = [];
  for (const [hour, segs] of cuts) {
    const sq = { ...q, periods: segs };
    const range = { fromMs: hour * HOUR_MS, toMs: (hour + 1) * HOUR_MS };
    const periods = segs.map((s) => s.period);
    raw.push({ ...usageSumsSql(d, sq, false, { startIn: range }), periods });
    raw.push({ ...usageSumsSql(d, sq, false, { endIn: range }), periods });
  }
  return { rollup, open: openSql(d, q), raw, cuts };
}

/** A rollup row as an array: team_id, ka, kb, n, then SUMS in order (HOUR_COLUMNS). */
export type HourRow = [string, number, number, number, ...number[]];
/** A usage-sums row as an array: period, key, ka, kb, n, then SUMS in order (usageSumsSql's columns). */
export type SumArray = [number, string | null, number, number, number, ...number[]];

const S = SUMS.length;
/** Offsets in SUMS. */
const HEAD = 0;
const TAIL = 5;
const RATE = 10;
const UPLOAD = 15;

/**
 * Usage-sums rows (hour buckets) from the rollup's rows and the raw statements' rows: each
 * rollup row clipped to each period's whole hours (its head, its tail, its full hours between as
 * one row whose head and tail are full hours too), its full hours in cut hours by the share of
 * the hour cut, the open records' groups clipped per period (usage-open.ts), and the raw rows as
 * they are; rows of one period, key and hour pair added up.
 * Rows arrive as arrays (building an object per row costs more than the rest).
 */
export function hourRows(
  q: UsageSumsQuery,
  plan: ReturnType<typeof hourPlan>,
  rollup: readonly HourRow[],
  open: readonly OpenGroup[],
  raw: ReadonlyArray<readonly SumArray[]>,
): UsageSumRow[] {
  // Per period and key, rows by hour pair (a number: ka, and kb - ka below 2^21 hours).
  type Acc = { period: number; key: string | null; ka: number; kb: number; n: number; v: number[] };
  // Per period, per key (no strings built per row: most rows share the last group).
  const groups = new Map<number, Map<string | null, Map<number, Acc>>>();
  let last: { period: number; key: string | null; rows: Map<number, Acc> } | null = null;
  const acc = (period: number, key: string | null, ka: number, kb: number, n: number): number[] => {
    let rows = last !== null && last.period === period && last.key === key ? last.rows : undefined;
    if (!rows) {
      let byKey = groups.get(period);
      if (!byKey) groups.set(period, (byKey = new Map()));
      rows = byKey.get(key);
      if (!rows) byKey.set(key, (rows = new Map()));
      last = { period, key, rows };
    }
    const id = ka * 2_097_152 + (kb - ka);
    let row = rows.get(id);
    if (!row) rows.set(id, (row = { period, key, ka, kb, n: 0, v: new Array<number>(S).fill(0) }));
    row.n += n;
    return row.v;
  };
  const team = q.key === "team";
  q.periods.forEach((p, period) => {
    const a = Math.ceil(p.fromMs / HOUR_MS);
    const b = Math.floor(p.toMs / HOUR_MS);
    for (const r of rollup) {
      const key = team ? r[0] : null;
      const ka = r[1];
      const kb = r[2];
      const n = r[3];
      if (ka >= a && ka < b) {
        const v = acc(period, key, ka, ka, n);
        for (let j = 0; j < 5; j++) v[HEAD + j] = (v[HEAD + j] as number) + (r[4 + HEAD + j] as number);
        v[UPLOAD] = (v[UPLOAD] as number) + (r[4 + UPLOAD] as number);
      }
      if (kb > ka && kb >= a && kb < b) {
        const v = acc(period, key, kb, kb, n);
        for (let j = 0; j < 5; j++) v[HEAD + j] = (v[HEAD + j] as number) + (r[4 + TAIL + j] as number);
      }
      const lo = Math.max(ka + 1, a);
      const hi = Math.min(kb - 1, b - 1);
      if (lo <= hi) {
        const v = acc(period, key, lo, hi, n);
        for (let j = 0; j < 5; j++) {
          const rate = r[4 + RATE + j] as number;
          v[HEAD + j] = (v[HEAD + j] as number) + rate * HOUR_MS;
          v[TAIL + j] = (v[TAIL + j] as number) + rate * HOUR_MS;
          v[RATE + j] = (v[RATE + j] as number) + rate;
        }
      }
    }
  });
  for (const [hour, segs] of plan.cuts)
    for (const s of segs)
      for (const r of rollup)
        if (r[1] < hour && hour < r[2]) {
          const v = acc(s.period, team ? r[0] : null, hour, hour, r[3]);
          for (let j = 0; j < 5; j++) v[HEAD + j] = (v[HEAD + j] as number) + (r[4 + RATE + j] as number) * (s.toMs - s.fromMs);
        }
  for (const r of openRows(q, open)) {
    const v = acc(r[0], r[1], r[2], r[3], r[4]);
    for (let j = 0; j < S; j++) v[j] = (v[j] as number) + (r[5 + j] as number);
  }
  plan.raw.forEach((st, i) => {
    for (const r of raw[i] ?? []) {
      const period = st.periods[r[0]];
      if (period === undefined) throw new Error(`usage rollup: no period ${r[0]}`);
      const v = acc(period, r[1], r[2], r[3], r[4]);
      for (let j = 0; j < S; j++) v[j] = (v[j] as number) + (r[5 + j] as number);
    }
  });
  const rows: UsageSumRow[] = [];
  for (const byKey of groups.values())
    for (const g of byKey.values())
      for (const { period, key, ka, kb, n, v } of g.values())
        rows.push({
          period,
          key,
          ka,
          kb,
          n,
          head_vcpu_ms: v[0] ?? 0,
          head_memory_ms: v[1] ?? 0,
          head_disk_ms: v[2] ?? 0,
          head_bytes_ms: v[3] ?? 0,
          head_volume_ms: v[4] ?? 0,
          tail_vcpu_ms: v[5] ?? 0,
          tail_memory_ms: v[6] ?? 0,
          tail_disk_ms: v[7] ?? 0,
          tail_bytes_ms: v[8] ?? 0,
          tail_volume_ms: v[9] ?? 0,
          vcpus: v[10] ?? 0,
          memory_gib: v[11] ?? 0,
          disk_gib: v[12] ?? 0,
          stored_bytes: v[13] ?? 0,
          volume_bytes: v[14] ?? 0,
          upload_bytes: v[15] ?? 0,
        });
  return rows;
}
