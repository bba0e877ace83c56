import type Database from "better-sqlite3";
import { SANDBOX_KEY, sqliteParams, type UsageSumRow, type UsageSumsQuery, usageSumsSql } from "./usage-sums.js";

// SQLite's way to the usage sums: its aggregates have no hash grouping (a GROUP BY sorts every
// row) and its expressions are interpreted, so the general statement costs as much as reading
// every record into JavaScript. Instead: per piece of the window (a price period cut at bucket
// edges), one aggregate over the records starting in it, a range of a covering index with no
// grouping; then one statement for what crosses a piece's end (open records, records past their
// bucket or a price change, records started before the window), few of them.

/** More pieces than this (hours over months): the general statement instead. */
const MAX_PIECES = 2000;

interface Piece {
  period: number;
  q0: number;
  q1: number;
  bucket: number;
}

function piecesOf(q: UsageSumsQuery): Piece[] | null {
  const out: Piece[] = [];
  for (const [period, p] of q.periods.entries()) {
    for (let t = p.fromMs; t < p.toMs; ) {
      const bucket = Math.trunc(t / q.bucketMs);
      const end = Math.min(p.toMs, (bucket + 1) * q.bucketMs);
      out.push({ period, q0: t, q1: end, bucket });
      if (out.length > MAX_PIECES) return null;
      t = end;
    }
  }
  return out;
}

const KEYS = { none: "NULL", sandbox: SANDBOX_KEY, team: "m.team_id", labels: "s.labels", subject: "m.subject_id" };

/**
 * The amounts of the records of `kinds` starting in [@q0, @q1), up to @q1 (uploads: their
 * charge): sandboxes apart from checkpoints, volumes and uploads, each an index range with no CASE per row.
 */
function headsSql(q: UsageSumsQuery, sandboxes: boolean): string {
  const kinds = sandboxes ? "m.kind = 'sandbox'" : "m.kind IN ('checkpoint', 'volume', 'upload')";
  const where = [kinds, "m.start_ms >= CAST(@q0 AS INTEGER)", "m.start_ms < CAST(@q1 AS INTEGER)"];
  if (q.teamId !== undefined) where.unshift("m.team_id = @team");
  if (q.subjects) {
    where.push("m.subject_id IN (SELECT value FROM json_each(@subjects))");
    where.push(`m.kind IN (${q.subjects.kinds.map((k) => `'${k}'`).join(", ")})`);
  }
  const end = "coalesce(m.end_ms, max(CAST(@now AS INTEGER), m.start_ms))";
  where.push(sandboxes ? `${end} > m.start_ms` : `(m.kind = 'upload' OR ${end} > m.start_ms)`);
  // Closed inside the piece (most records): the span is the record's own.
  const span = `(CASE WHEN m.end_ms <= CAST(@q1 AS INTEGER) THEN m.end_ms ELSE min(${end}, CAST(@q1 AS INTEGER)) END - m.start_ms)`;
  const grouped = q.key !== "none" && !(q.key === "team" && q.teamId !== undefined);
  const key = q.key === "team" && q.teamId !== undefined ? "@team" : KEYS[q.key];
  const sums = sandboxes
    ? `total(m.vcpus * ${span}) AS head_vcpu_ms, total(m.memory_gib * ${span}) AS head_memory_ms,
       total(m.disk_gib * ${span}) AS head_disk_ms, 0 AS head_bytes_ms, 0 AS head_volume_ms, 0 AS upload_bytes`
    : `0 AS head_vcpu_ms, 0 AS head_memory_ms, 0 AS head_disk_ms,
       total(CASE WHEN m.kind = 'checkpoint' THEN m.stored_bytes * 1.0 * ${span} END) AS head_bytes_ms,
       total(CASE WHEN m.kind = 'volume' THEN m.stored_bytes * 1.0 * ${span} END) AS head_volume_ms,
       total(CASE WHEN m.kind = 'upload' THEN m.stored_bytes * 1.0 END) AS upload_bytes`;
  return `SELECT ${key} AS key, count(*) AS n, ${sums}
    FROM meter_records m ${q.key === "labels" ? "LEFT JOIN sandboxes s ON s.id = m.sandbox_id" : ""}
    WHERE ${where.join(" AND ")} ${grouped ? "GROUP BY key" : ""}`;
}

type HeadRow = Pick<
  UsageSumRow,
  "key" | "n" | "head_vcpu_ms" | "head_memory_ms" | "head_disk_ms" | "head_bytes_ms" | "head_volume_ms" | "upload_bytes"
>;

export function sqliteUsageSums(db: Database.Database, q: UsageSumsQuery): UsageSumRow[] {
  const pieces = piecesOf(q);
  if (pieces === null) {
    const { sql, params } = usageSumsSql("sqlite", q);
    return db.prepare(sql).all(sqliteParams(params)) as UsageSumRow[];
  }
  const heads = [db.prepare(headsSql(q, true)), db.prepare(headsSql(q, false))];
  const base: Record<string, unknown> = { now: q.nowMs };
  if (q.teamId !== undefined) base.team = q.teamId;
  if (q.subjects) base.subjects = JSON.stringify(q.subjects.ids);
  const rows: UsageSumRow[] = [];
  for (const p of pieces) {
    for (const stmt of heads) {
      for (const h of stmt.all({ ...base, q0: p.q0, q1: p.q1 }) as HeadRow[]) {
        if (h.n === 0) continue;
        // One literal shape for every row (spreads make each row slow to build and to read).
        rows.push({
          period: p.period,
          key: h.key ?? null,
          ka: p.bucket,
          kb: p.bucket,
          n: h.n,
          head_vcpu_ms: h.head_vcpu_ms,
          head_memory_ms: h.head_memory_ms,
          head_disk_ms: h.head_disk_ms,
          head_bytes_ms: h.head_bytes_ms,
          head_volume_ms: h.head_volume_ms,
          tail_vcpu_ms: 0,
          tail_memory_ms: 0,
          tail_disk_ms: 0,
          tail_bytes_ms: 0,
          tail_volume_ms: 0,
          vcpus: 0,
          memory_gib: 0,
          disk_gib: 0,
          stored_bytes: 0,
          volume_bytes: 0,
          upload_bytes: h.upload_bytes,
        });
      }
    }
  }
  const { sql, params } = usageSumsSql("sqlite", q, true);
  rows.push(...(db.prepare(sql).all(sqliteParams(params)) as UsageSumRow[]));
  return rows;
}
