import type { MeterKind } from "./rows.js";

// Usage added up by the database: one aggregate over the meter records of a window, grouped by
// price period, key and time bucket, so a usage report, a cost or a budget check reads a few rows
// per bucket instead of every record. Written once for both stores (the dialects differ only in a
// few functions and in how parameters are written); the metering service prices the sums.

/** Upper bound of every millisecond time (open records' end in the window index). */
export const OPEN_END_MS = 9007199254740991;
/** The bucket size of a grouping without time buckets: every span falls in bucket 0. */
export const NO_BUCKETS_MS = 1_000_000_000_000_000;

/**
 * Indexes of the sums: records ending at or after a window's start (open ones: OPEN_END_MS), of
 * one team or of all, so a month's sums read the month's records, not the history; and the
 * columns the sums read by kind in start order, per team and for all teams, so SQLite's per-piece
 * aggregates (sqlite-usage.ts) read an index range and never the table.
 */
export const METER_WINDOW_MIGRATION = `
  CREATE INDEX meter_records_team_end ON meter_records(team_id, coalesce(end_ms, ${OPEN_END_MS}));
  CREATE INDEX meter_records_end ON meter_records(coalesce(end_ms, ${OPEN_END_MS}));
  CREATE INDEX meter_records_team_sums ON meter_records(team_id, kind, start_ms, end_ms, vcpus, memory_gib, disk_gib,
    stored_bytes, sandbox_id);
  CREATE INDEX meter_records_sums ON meter_records(kind, start_ms, end_ms, vcpus, memory_gib, disk_gib, stored_bytes,
    team_id);`;

export interface UsageSumsQuery {
  teamId?: string | undefined;
  /** Open records are billed up to now. */
  nowMs: number;
  /** Consecutive spans, each under one price (in order); together the window. */
  periods: ReadonlyArray<{ fromMs: number; toMs: number }>;
  /** Time buckets of this size (day, hour), or NO_BUCKETS_MS. */
  bucketMs: number;
  /** The grouping key of each row (labels: the sandbox's labels JSON, null when it is gone). */
  key: "none" | "sandbox" | "team" | "labels" | "subject";
  /** Only these subjects (and kinds). */
  subjects?: { kinds: readonly MeterKind[]; ids: readonly string[] } | undefined;
}

/**
 * The records of one period, key and bucket pair: their spans clipped to the period start in
 * bucket `ka` and end in bucket `kb` (uploads: ka = kb, their instant). head_*: amount-milliseconds
 * in bucket ka (the whole span when ka = kb); tail_*: in bucket kb when kb > ka; the plain sums
 * (vcpus ...) are what each full bucket between them holds per millisecond. `*_bytes` are
 * checkpoint records' stored bytes, `*_volume*` volume records'; upload_bytes the upload records'.
 */
export interface UsageSumRow {
  period: number;
  key: string | null;
  ka: number;
  kb: number;
  n: number;
  head_vcpu_ms: number;
  head_memory_ms: number;
  head_disk_ms: number;
  head_bytes_ms: number;
  head_volume_ms: number;
  tail_vcpu_ms: number;
  tail_memory_ms: number;
  tail_disk_ms: number;
  tail_bytes_ms: number;
  tail_volume_ms: number;
  vcpus: number;
  memory_gib: number;
  disk_gib: number;
  stored_bytes: number;
  volume_bytes: number;
  upload_bytes: number;
}

type Dialect = "sqlite" | "pg";

/** A volume's records bill to no sandbox (sandbox_id ''): grouped by sandbox, under the volume. */
export const SANDBOX_KEY = "coalesce(nullif(m.sandbox_id, ''), m.subject_id)";

const KEYS = { none: "NULL", sandbox: SANDBOX_KEY, team: "m.team_id", labels: "s.labels", subject: "m.subject_id" };

/**
 * Which records a statement reads instead of the window's: those starting in a range (closed), or
 * those ending in (fromMs, toMs] that started before it (usage-hours.ts; open ones: usage-open.ts).
 */
export type UsageOnly = { startIn: { fromMs: number; toMs: number } } | { endIn: { fromMs: number; toMs: number } };

/**
 * The statement and its parameters (`$n` for PostgreSQL, `@pn` for SQLite: bind them with
 * sqliteParams). `crossing`: only what records carry past the piece (period and bucket) they
 * start in, and what records started before the window carry into it (sqlite-usage.ts adds the
 * rest per piece); uploads then not at all.
 */
export function usageSumsSql(
  dialect: Dialect,
  q: UsageSumsQuery,
  crossing = false,
  only?: UsageOnly,
): { sql: string; params: unknown[] } {
  const first = q.periods[0];
  const last = q.periods.at(-1);
  if (!first || !last) throw new Error("usage sums need at least one period");
  const params: unknown[] = [];
  const pg = dialect === "pg";
  const ref = (v: unknown) => {
    params.push(v);
    return pg ? `$${params.length}` : `@p${params.length}`;
  };
  // better-sqlite3 binds large numbers as REAL: cast, so bucket numbers divide as integers.
  const int = (v: number) => (pg ? `${ref(v)}::bigint` : `CAST(${ref(v)} AS INTEGER)`);
  const text = (v: string) => (pg ? `${ref(v)}::text` : ref(v));
  const greatest = pg ? "GREATEST" : "max";
  const least = pg ? "LEAST" : "min";
  const sum = (x: string) => (pg ? `coalesce(sum(${x}), 0)` : `total(${x})`);
  const float = (x: string) => (pg ? `${x}::double precision` : `(${x} * 1.0)`);
  const periods = q.periods.map((p, i) => `(${pg ? `${i}::int` : i}, ${int(p.fromMs)}, ${int(p.toMs)})`).join(", ");
  const now = int(q.nowMs);
  const size = int(q.bucketMs);
  const endOf = `coalesce(m.end_ms, ${OPEN_END_MS})`;
  // SQLite uses an index range on the end expression only against a plain parameter (not a CAST).
  const bound = (v: number) => (pg ? int(v) : ref(v));
  const where =
    only === undefined
      ? [`m.start_ms < ${int(last.toMs)}`, `${endOf} >= ${int(first.fromMs)}`]
      : "startIn" in only
        ? [`m.start_ms >= ${bound(only.startIn.fromMs)}`, `m.start_ms < ${bound(only.startIn.toMs)}`, "m.end_ms IS NOT NULL"]
        : [
            `${endOf} > ${bound(only.endIn.fromMs)}`,
            `${endOf} <= ${bound(only.endIn.toMs)}`,
            `m.start_ms < ${bound(only.endIn.fromMs)}`,
          ];
  if (q.teamId !== undefined) where.unshift(`m.team_id = ${text(q.teamId)}`);
  if (q.subjects) {
    where.push(
      pg
        ? `m.subject_id = ANY(${ref([...q.subjects.ids])}::text[])`
        : `m.subject_id IN (SELECT value FROM json_each(${ref(JSON.stringify(q.subjects.ids))}))`,
    );
    where.push(`m.kind IN (${q.subjects.kinds.map(text).join(", ")})`);
  }
  const open = `coalesce(m.end_ms, ${greatest}(${now}, m.start_ms))`;
  let start = `${greatest}(m.start_ms, p.p0)`;
  if (crossing) {
    // A cheap test first: open, started before the window, past its bucket, or across a price change.
    const edges = q.periods.slice(1).map((p) => {
      const e = int(p.fromMs);
      return `(m.start_ms < ${e} AND m.end_ms > ${e})`;
    });
    const past = [`m.end_ms IS NULL`, `m.start_ms < ${int(first.fromMs)}`, `m.end_ms > (m.start_ms / ${size} + 1) * ${size}`];
    where.push(`m.kind IN ('sandbox', 'checkpoint', 'volume')`, `(${[...past, ...edges].join(" OR ")})`);
    start = `CASE WHEN m.start_ms >= p.p0 THEN ${least}((m.start_ms / ${size} + 1) * ${size}, p.p1) ELSE p.p0 END`;
  }
  const labels = q.key === "labels" ? "LEFT JOIN sandboxes s ON s.id = m.sandbox_id" : "";
  // SQLite's planner would read an `only` range by start_ms < x (every earlier record): name the index.
  const team = q.teamId !== undefined;
  const index = only === undefined ? null : "startIn" in only ? (team ? "team" : "start") : team ? "team_end" : "end";
  const indexed = pg || index === null ? "" : `INDEXED BY meter_records_${index}`;
  const key = pg && q.key === "none" ? "NULL::text" : KEYS[q.key];
  const sql = `
    WITH periods(i, p0, p1) AS (VALUES ${periods}),
    c AS ${pg ? "" : "MATERIALIZED "}(
      SELECT p.i AS i, ${key} AS key, m.kind AS kind,
        CASE WHEN m.kind = 'sandbox' THEN m.vcpus ELSE 0 END AS cv,
        CASE WHEN m.kind = 'sandbox' THEN m.memory_gib ELSE 0 END AS cm,
        CASE WHEN m.kind = 'sandbox' THEN m.disk_gib ELSE 0 END AS cd,
        CASE WHEN m.kind = 'checkpoint' THEN ${float("m.stored_bytes")} ELSE 0 END AS cb,
        CASE WHEN m.kind = 'volume' THEN ${float("m.stored_bytes")} ELSE 0 END AS cw,
        CASE WHEN m.kind = 'upload' THEN ${float("m.stored_bytes")} ELSE 0 END AS ub,
        CASE WHEN m.kind = 'upload' THEN m.start_ms ELSE ${start} END AS a,
        CASE WHEN m.kind = 'upload' THEN m.start_ms ELSE ${least}(${open}, p.p1) END AS b,
        m.kind = 'upload' AND m.start_ms >= p.p0 AND m.start_ms < p.p1 AS upload_in
      FROM meter_records m ${indexed} CROSS JOIN periods p ${labels}
      WHERE ${where.join(" AND ")}
    ),
    d AS (
      SELECT i, key, cv, cm, cd, cb, cw, ub, a, b, a / ${size} AS ka,
        CASE WHEN kind = 'upload' THEN a / ${size} ELSE (b - 1) / ${size} END AS kb
      FROM c WHERE upload_in OR (kind <> 'upload' AND b > a)
    ),
    e AS (
      SELECT *, ${least}(b, (ka + 1) * ${size}) - a AS h, CASE WHEN kb > ka THEN b - kb * ${size} ELSE 0 END AS t FROM d
    )
    SELECT i AS period, key, ka, kb, count(*) AS n,
      ${sum("cv * h")} AS head_vcpu_ms, ${sum("cm * h")} AS head_memory_ms,
      ${sum("cd * h")} AS head_disk_ms, ${sum("cb * h")} AS head_bytes_ms, ${sum("cw * h")} AS head_volume_ms,
      ${sum("cv * t")} AS tail_vcpu_ms, ${sum("cm * t")} AS tail_memory_ms,
      ${sum("cd * t")} AS tail_disk_ms, ${sum("cb * t")} AS tail_bytes_ms, ${sum("cw * t")} AS tail_volume_ms,
      ${sum("cv")} AS vcpus, ${sum("cm")} AS memory_gib, ${sum("cd")} AS disk_gib,
      ${sum("cb")} AS stored_bytes, ${sum("cw")} AS volume_bytes, ${sum("ub")} AS upload_bytes
    FROM e GROUP BY i, key, ka, kb`;
  return { sql, params };
}

/** usageSumsSql's SQLite parameters as the named object better-sqlite3 binds. */
export function sqliteParams(params: readonly unknown[]): Record<string, unknown> {
  return Object.fromEntries(params.map((v, i) => [`p${i + 1}`, v]));
}
