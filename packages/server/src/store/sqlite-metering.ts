import type Database from "better-sqlite3";
import { checkpointBilled, checkpointMeterRecords, sandboxMeterRecord } from "./meter-rules.js";
import type { MeterKind, MeterRecord, MeterRecordWithLabels } from "./rows.js";
import { sqliteUsageSums } from "./sqlite-usage.js";
import { type HourRow, hourPlan, hourRows, rollupAnswers, type SumArray } from "./usage-hours.js";
import type { OpenGroup } from "./usage-open.js";
import { sqliteParams, type UsageSumRow, type UsageSumsQuery } from "./usage-sums.js";

// The SQL behind metering: an append-only table of intervals. A sandbox gets one record per
// billed state it enters (RUNNING, PAUSED), a DURABLE checkpoint one per stored size, and a
// checkpoint's upload charge one instant record. The only update ever made is closing the open
// record (end_ms) at the next transition, in the transaction of that transition: a crash can
// leave a record open (billed on until the state is known again), never lose or double one.

export const METERING_MIGRATION = `
  CREATE TABLE meter_records (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
    subject_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, team_id TEXT NOT NULL, state TEXT NOT NULL,
    vcpus REAL NOT NULL DEFAULT 0, memory_gib REAL NOT NULL DEFAULT 0, disk_gib REAL NOT NULL DEFAULT 0,
    stored_bytes INTEGER NOT NULL DEFAULT 0, start_ms INTEGER NOT NULL, end_ms INTEGER);
  CREATE INDEX meter_records_team ON meter_records(team_id, start_ms);
  CREATE INDEX meter_records_subject ON meter_records(subject_id, kind);
  CREATE TABLE team_budgets (team_id TEXT PRIMARY KEY, monthly_budget_usd REAL NOT NULL);`;

function openRecord(db: Database.Database, subjectId: string, kind: MeterKind): MeterRecord | undefined {
  return db
    .prepare("SELECT * FROM meter_records WHERE subject_id = ? AND kind = ? AND end_ms IS NULL ORDER BY id DESC LIMIT 1")
    .get(subjectId, kind) as MeterRecord | undefined;
}

function close(db: Database.Database, r: MeterRecord, nowMs: number): void {
  db.prepare("UPDATE meter_records SET end_ms = ? WHERE id = ? AND end_ms IS NULL").run(Math.max(nowMs, r.start_ms), r.id);
}

export function insertMeterRecord(db: Database.Database, r: Omit<MeterRecord, "id">): void {
  db.prepare(
    `INSERT INTO meter_records (kind, subject_id, sandbox_id, team_id, state, vcpus, memory_gib, disk_gib, stored_bytes, start_ms, end_ms)
     VALUES (@kind, @subject_id, @sandbox_id, @team_id, @state, @vcpus, @memory_gib, @disk_gib, @stored_bytes, @start_ms, @end_ms)`,
  ).run(r);
}

/** After a sandbox's status changed (same transaction): closes its open record, opens the next. */
export function meterSandbox(db: Database.Database, id: string, nowMs: number): void {
  const sb = db.prepare("SELECT team_id, status, cpu_cores, memory_gb, disk_size_gb FROM sandboxes WHERE id = ?").get(id) as
    | { team_id: string; status: string; cpu_cores: number; memory_gb: number; disk_size_gb: number }
    | undefined;
  const open = openRecord(db, id, "sandbox");
  if (open && sb && open.state === sb.status) return;
  if (open) close(db, open, nowMs);
  const record = sb ? sandboxMeterRecord(id, sb, nowMs) : null;
  if (record) insertMeterRecord(db, record);
}

/**
 * After a checkpoint changed (same transaction): opens or closes its records by the rule in
 * meter-rules.ts (checkpointBilled); turning DURABLE adds the upload charge once.
 */
export function meterCheckpoint(db: Database.Database, id: string, nowMs: number): void {
  const c = db.prepare("SELECT team_id, sandbox_id, state, stored_bytes FROM checkpoints WHERE id = ?").get(id) as
    | { team_id: string; sandbox_id: string; state: string; stored_bytes: number }
    | undefined;
  const open = openRecord(db, id, "checkpoint");
  const billed = checkpointBilled(c);
  if (open && billed && open.stored_bytes === c.stored_bytes) return;
  if (open) close(db, open, nowMs);
  if (!billed) return;
  const uploaded = db.prepare("SELECT 1 FROM meter_records WHERE subject_id = ? AND kind = 'upload'").get(id);
  for (const r of checkpointMeterRecords(id, c, nowMs, uploaded !== undefined)) insertMeterRecord(db, r);
}

/** Records that overlap [fromMs, toMs) (uploads: within it), of one team or all; labels only when asked (a join). */
export function listMeterRecords(
  db: Database.Database,
  q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean },
): MeterRecordWithLabels[] {
  const team = q.teamId === undefined ? "" : "m.team_id = @teamId AND";
  const labels = q.withLabels ? "s.labels AS labels" : "NULL AS labels";
  const join = q.withLabels ? "LEFT JOIN sandboxes s ON s.id = m.sandbox_id" : "";
  return db
    .prepare(
      `SELECT m.*, ${labels} FROM meter_records m ${join}
       WHERE ${team} m.start_ms < @toMs AND (m.end_ms IS NULL OR m.end_ms > @fromMs OR (m.kind = 'upload' AND m.start_ms >= @fromMs))`,
    )
    .all({ ...(q.teamId === undefined ? {} : { teamId: q.teamId }), fromMs: q.fromMs, toMs: q.toMs }) as MeterRecordWithLabels[];
}

/** Prepared statements of the rollup's reads by text (their parameters vary, their texts repeat). */
const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

function prepared(db: Database.Database, sql: string): Database.Statement {
  let cache = statements.get(db);
  if (!cache) statements.set(db, (cache = new Map()));
  let stmt = cache.get(sql);
  if (!stmt) {
    if (cache.size >= 64) cache.clear();
    cache.set(sql, (stmt = db.prepare(sql).raw(true)));
  }
  return stmt;
}

/** Usage sums of a window (usage-sums.ts). */
export function usageSums(db: Database.Database, q: UsageSumsQuery): UsageSumRow[] {
  if (!rollupAnswers(q)) return sqliteUsageSums(db, q);
  // The hourly rollup (usage-hours.ts): its rows and the few records it cannot answer, in one read transaction.
  return db.transaction(() => {
    const plan = hourPlan("sqlite", q);
    const rows = (st: { sql: string; params: unknown[] }) => prepared(db, st.sql).all(sqliteParams(st.params));
    const rollup = rows(plan.rollup) as HourRow[];
    const open = rows(plan.open) as OpenGroup[];
    const raw = plan.raw.map((st) => rows(st) as SumArray[]);
    return hourRows(q, plan, rollup, open, raw);
  })();
}

/** Every record of these sandboxes (kind sandbox) or checkpoints (checkpoint, upload). */
export function meterRecordsOf(db: Database.Database, subject: "sandbox" | "checkpoint", ids: readonly string[]): MeterRecord[] {
  if (ids.length === 0) return [];
  const kinds = subject === "sandbox" ? "('sandbox')" : "('checkpoint', 'upload')";
  const out: MeterRecord[] = [];
  // SQLite's default limit on bound parameters is far above a page, but chunk anyway.
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    out.push(
      ...(db
        .prepare(`SELECT * FROM meter_records WHERE kind IN ${kinds} AND subject_id IN (${chunk.map(() => "?").join(",")})`)
        .all(...chunk) as MeterRecord[]),
    );
  }
  return out;
}

export function getTeamBudget(db: Database.Database, teamId: string): number | null {
  const r = db.prepare("SELECT monthly_budget_usd FROM team_budgets WHERE team_id = ?").get(teamId) as
    | { monthly_budget_usd: number }
    | undefined;
  return r?.monthly_budget_usd ?? null;
}

export function setTeamBudget(db: Database.Database, teamId: string, usd: number | null): void {
  if (usd === null) db.prepare("DELETE FROM team_budgets WHERE team_id = ?").run(teamId);
  else
    db.prepare(
      "INSERT INTO team_budgets (team_id, monthly_budget_usd) VALUES (?, ?) ON CONFLICT(team_id) DO UPDATE SET monthly_budget_usd = excluded.monthly_budget_usd",
    ).run(teamId, usd);
}

/** created_at and status of the sandboxes created in [fromIso, toIso), of one team or all. */
export function creationsBetween(
  db: Database.Database,
  q: { teamId?: string; fromIso: string; toIso: string },
): Array<{ created_at: string; status: string }> {
  const team = q.teamId === undefined ? "" : "team_id = @teamId AND";
  return db
    .prepare(`SELECT created_at, status FROM sandboxes WHERE ${team} created_at >= @fromIso AND created_at < @toIso`)
    .all(q) as Array<{ created_at: string; status: string }>;
}

/** Sandboxes RUNNING now, of one team or all. */
export function countRunning(db: Database.Database, teamId?: string): number {
  const r = (
    teamId === undefined
      ? db.prepare("SELECT count(*) AS n FROM sandboxes WHERE status = 'RUNNING'").get()
      : db.prepare("SELECT count(*) AS n FROM sandboxes WHERE status = 'RUNNING' AND team_id = ?").get(teamId)
  ) as { n: number };
  return r.n;
}

export function countByStatus(db: Database.Database): Record<string, number> {
  const rows = db.prepare("SELECT status, count(*) AS n FROM sandboxes GROUP BY status").all() as Array<{
    status: string;
    n: number;
  }>;
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export function durableCheckpointBytes(db: Database.Database): number {
  return (
    db.prepare("SELECT coalesce(sum(stored_bytes), 0) AS n FROM checkpoints WHERE state = 'DURABLE'").get() as { n: number }
  ).n;
}
