import type { UsageSumsQuery } from "./usage-sums.js";

// Open meter records (end_ms NULL: a sandbox running now, a checkpoint or volume still stored) in a
// usage report answered from the hourly rollup (usage-hours.ts). The rollup holds closed records
// only; the open ones run up to now, so each would be clipped and spread over the hours to now.
// Instead the database adds them up per start hour (a partial index holds just the open records,
// every column the sums read), split where a period starts or ends or where now falls in that
// hour, so every record of a group is clipped alike. Per group it answers the amounts per
// millisecond (s0) and the amounts times each record's offset into its start hour (s1): a group
// whose records start at a, clipped to [a, b), holds s0 * (b - hour start) - s1 in its first hour.
// The offsets are below an hour, so the products stay exact where the plain times would not.

const HOUR_MS = 3_600_000;

/** The partial index of open records, of one team and of all, with the columns the sums read. */
export const METER_OPEN_MIGRATION = `
  CREATE INDEX meter_records_open_team ON meter_records(team_id, start_ms, kind, vcpus, memory_gib, disk_gib, stored_bytes)
    WHERE end_ms IS NULL;
  CREATE INDEX meter_records_open ON meter_records(start_ms, kind, vcpus, memory_gib, disk_gib, stored_bytes, team_id)
    WHERE end_ms IS NULL;`;

/** The amounts a record carries per millisecond, in usage-sums order: vCPUs, memory, disk, checkpoint bytes, volume bytes. */
const RATES = 5;

/**
 * One group of open records: key, start hour, edge rank, upload (1) or not (0), count, earliest
 * start, then s0 (RATES), s1 (RATES) and upload bytes.
 */
export type OpenGroup = [string | null, number, number, number, number, number, ...number[]];

type Dialect = "sqlite" | "pg";

/** Every instant a period's clipping turns on: period starts and ends, and where now cuts a period. */
export function openEdges(q: UsageSumsQuery): number[] {
  const edges = new Set<number>();
  for (const p of q.periods) {
    edges.add(p.fromMs);
    edges.add(p.toMs);
    edges.add(Math.min(q.nowMs, p.toMs));
  }
  return [...edges].sort((a, b) => a - b);
}

/** The statement grouping the window's open records (parameters `$n` for PostgreSQL, `@pn` for SQLite). */
export function openSql(d: Dialect, q: UsageSumsQuery): { sql: string; params: unknown[] } {
  const last = q.periods.at(-1);
  if (!last) throw new Error("usage sums need at least one period");
  const pg = d === "pg";
  const params: unknown[] = [];
  const ref = (v: unknown) => {
    params.push(v);
    return pg ? `$${params.length}` : `@p${params.length}`;
  };
  const int = (x: string) => (pg ? `(${x})::int` : `(${x})`);
  const float = (x: string) => (pg ? `(${x})::double precision` : `(${x} * 1.0)`);
  const sum = (x: string) => (pg ? `coalesce(sum(${x}), 0)` : `total(${x})`);
  const rank = openEdges(q)
    .map((e) => int(`m.start_ms >= ${ref(e)}`))
    .join(" + ");
  const of = (kind: string, x: string) => `CASE WHEN m.kind = '${kind}' THEN ${x} ELSE 0 END`;
  const rates = [
    of("sandbox", "m.vcpus"),
    of("sandbox", "m.memory_gib"),
    of("sandbox", "m.disk_gib"),
    of("checkpoint", float("m.stored_bytes")),
    of("volume", float("m.stored_bytes")),
  ];
  const off = `(m.start_ms - (m.start_ms / ${HOUR_MS}) * ${HOUR_MS})`;
  const where = ["m.end_ms IS NULL", `m.start_ms < ${ref(last.toMs)}`];
  if (q.teamId !== undefined) where.unshift(`m.team_id = ${pg ? `${ref(q.teamId)}::text` : ref(q.teamId)}`);
  const key = q.key === "team" ? "m.team_id" : pg ? "NULL::text" : "NULL";
  const sql = `SELECT ${key} AS key, m.start_ms / ${HOUR_MS} AS ka, ${rank} AS r,
      CASE WHEN m.kind = 'upload' THEN 1 ELSE 0 END AS up, count(*) AS n, min(m.start_ms) AS s,
      ${rates.map((x) => sum(x)).join(", ")}, ${rates.map((x) => sum(`(${x}) * ${off}`)).join(", ")},
      ${sum(of("upload", float("m.stored_bytes")))}
    FROM meter_records m WHERE ${where.join(" AND ")}
    GROUP BY 1, 2, 3, 4`;
  return { sql, params };
}

/** A usage-sums row of hour buckets (period, key, ka, kb, n, then the sums) for hourRows to add. */
export type OpenRow = [number, string | null, number, number, number, ...number[]];

/**
 * The usage-sums rows of the open groups, per period: what usage-sums.ts would answer for the
 * same records (clipped to the period and to now, uploads at their instant).
 */
export function openRows(q: UsageSumsQuery, groups: readonly OpenGroup[]): OpenRow[] {
  const rows: OpenRow[] = [];
  q.periods.forEach((p, period) => {
    const end = Math.min(q.nowMs, p.toMs);
    for (const g of groups) {
      const [key, ka, , up, n, s] = g;
      const s0 = g.slice(6, 6 + RATES) as number[];
      const s1 = g.slice(6 + RATES, 6 + 2 * RATES) as number[];
      if (up === 1) {
        // An upload is an instant: counted in the period holding it (never written open today).
        if (s >= p.fromMs && s < p.toMs) rows.push([period, key, ka, ka, n, ...zeros(15), g[6 + 2 * RATES] as number]);
        continue;
      }
      if (s >= end) continue;
      // Started before the period: every record runs from its start; else each from its own start.
      const before = s < p.fromMs;
      const a = before ? p.fromMs : ka * HOUR_MS;
      if (end <= a && before) continue;
      const ha = Math.floor(a / HOUR_MS);
      const kb = Math.floor((end - 1) / HOUR_MS);
      const headEnd = Math.min(end, (ha + 1) * HOUR_MS);
      const head = s0.map((x, j) => (before ? x * (headEnd - a) : x * (headEnd - a) - (s1[j] as number)));
      const tail = s0.map((x) => (kb > ha ? x * (end - kb * HOUR_MS) : 0));
      rows.push([period, key, ha, kb, n, ...head, ...tail, ...s0, 0]);
    }
  });
  return rows;
}

function zeros(k: number): number[] {
  return new Array<number>(k).fill(0);
}
