import type pg from "pg";
import { checkpointBilled, checkpointMeterRecords, sandboxMeterRecord } from "./meter-rules.js";
import { all, type Db, one, run, tx } from "./pg-db.js";
import type { MeterKind, MeterRecord, MeterRecordWithLabels } from "./rows.js";
import { type HourRow, hourPlan, hourRows, rollupAnswers, type SumArray } from "./usage-hours.js";
import type { OpenGroup } from "./usage-open.js";
import { type UsageSumRow, type UsageSumsQuery, usageSumsSql } from "./usage-sums.js";

// The SQL behind PgStore's metering, the same intervals as sqlite-metering.ts: one record per
// billed sandbox status, one per stored size of a DURABLE checkpoint, one upload instant. The
// functions that follow a change run on the transaction's client, after the UPDATE or DELETE
// that locked the sandbox's or checkpoint's row, so two servers changing one subject meter in turn.

const RECORD_COLUMNS = [
  "kind",
  "subject_id",
  "sandbox_id",
  "team_id",
  "state",
  "vcpus",
  "memory_gib",
  "disk_gib",
  "stored_bytes",
  "start_ms",
  "end_ms",
] as const;

function openRecord(db: Db, subjectId: string, kind: MeterKind): Promise<MeterRecord | undefined> {
  return one<MeterRecord>(
    db,
    "SELECT * FROM meter_records WHERE subject_id = $1 AND kind = $2 AND end_ms IS NULL ORDER BY id DESC LIMIT 1",
    [subjectId, kind],
  );
}

async function close(db: Db, r: MeterRecord, nowMs: number): Promise<void> {
  await run(db, "UPDATE meter_records SET end_ms = $1 WHERE id = $2 AND end_ms IS NULL", [Math.max(nowMs, r.start_ms), r.id]);
}

/** Inserts records in batches (one statement per 500). */
export async function insertMeterRecords(db: Db, records: ReadonlyArray<Omit<MeterRecord, "id">>): Promise<void> {
  const n = RECORD_COLUMNS.length;
  for (let i = 0; i < records.length; i += 500) {
    const chunk = records.slice(i, i + 500);
    const rows = chunk.map((_, r) => `(${RECORD_COLUMNS.map((_, c) => `$${r * n + c + 1}`).join(", ")})`);
    const values = chunk.flatMap((rec) => RECORD_COLUMNS.map((c) => rec[c] ?? null));
    await run(db, `INSERT INTO meter_records (${RECORD_COLUMNS.join(", ")}) VALUES ${rows.join(", ")}`, values);
  }
}

/** After a sandbox's status changed (same transaction): closes its open record, opens the next. */
export async function meterSandbox(db: Db, id: string, nowMs: number): Promise<void> {
  const sb = await one<{ team_id: string; status: string; cpu_cores: number; memory_gb: number; disk_size_gb: number }>(
    db,
    "SELECT team_id, status, cpu_cores, memory_gb, disk_size_gb FROM sandboxes WHERE id = $1",
    [id],
  );
  const open = await openRecord(db, id, "sandbox");
  if (open && sb && open.state === sb.status) return;
  if (open) await close(db, open, nowMs);
  const record = sb ? sandboxMeterRecord(id, sb, nowMs) : null;
  if (record) await insertMeterRecords(db, [record]);
}

/**
 * After a checkpoint changed (same transaction): opens or closes its records by the rule in
 * meter-rules.ts (checkpointBilled); turning DURABLE adds the upload charge once.
 */
export async function meterCheckpoint(db: Db, id: string, nowMs: number): Promise<void> {
  const c = await one<{ team_id: string; sandbox_id: string; state: string; stored_bytes: number }>(
    db,
    "SELECT team_id, sandbox_id, state, stored_bytes FROM checkpoints WHERE id = $1",
    [id],
  );
  const open = await openRecord(db, id, "checkpoint");
  const billed = checkpointBilled(c);
  if (open && billed && open.stored_bytes === c.stored_bytes) return;
  if (open) await close(db, open, nowMs);
  if (!billed) return;
  const uploaded = await one(db, "SELECT 1 FROM meter_records WHERE subject_id = $1 AND kind = 'upload'", [id]);
  await insertMeterRecords(db, checkpointMeterRecords(id, c, nowMs, uploaded !== undefined));
}

/** Records that overlap [fromMs, toMs) (uploads: within it), of one team or all; labels only when asked. */
export function listMeterRecords(
  db: Db,
  q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean },
): Promise<MeterRecordWithLabels[]> {
  const params: unknown[] = [q.fromMs, q.toMs];
  let team = "";
  if (q.teamId !== undefined) {
    params.push(q.teamId);
    team = "m.team_id = $3 AND";
  }
  const labels = q.withLabels ? "s.labels AS labels" : "NULL::text AS labels";
  const join = q.withLabels ? "LEFT JOIN sandboxes s ON s.id = m.sandbox_id" : "";
  return all<MeterRecordWithLabels>(
    db,
    `SELECT m.*, ${labels} FROM meter_records m ${join}
     WHERE ${team} m.start_ms < $2 AND (m.end_ms IS NULL OR m.end_ms > $1 OR (m.kind = 'upload' AND m.start_ms >= $1))
     ORDER BY m.id`,
    params,
  );
}

/** Usage sums of a window (usage-sums.ts). */
export async function usageSums(pool: pg.Pool, q: UsageSumsQuery): Promise<UsageSumRow[]> {
  if (!rollupAnswers(q)) {
    const { sql, params } = usageSumsSql("pg", q);
    return all<UsageSumRow>(pool, sql, params);
  }
  // The hourly rollup (usage-hours.ts) and the few records it cannot answer, in one snapshot (a
  // record closing between two reads would otherwise count in both or neither).
  const plan = hourPlan("pg", q);
  return tx(pool, async (c) => {
    await c.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    const rows = async (st: { sql: string; params: unknown[] }) =>
      (await c.query({ text: st.sql, values: st.params, rowMode: "array" })).rows;
    const rollup = (await rows(plan.rollup)) as HourRow[];
    const open = (await rows(plan.open)) as OpenGroup[];
    const raw: SumArray[][] = [];
    for (const st of plan.raw) raw.push((await rows(st)) as SumArray[]);
    return hourRows(q, plan, rollup, open, raw);
  });
}

/** Every record of these sandboxes (kind sandbox) or checkpoints (checkpoint, upload). */
export function meterRecordsOf(db: Db, subject: "sandbox" | "checkpoint", ids: readonly string[]): Promise<MeterRecord[]> {
  if (ids.length === 0) return Promise.resolve([]);
  const kinds = subject === "sandbox" ? ["sandbox"] : ["checkpoint", "upload"];
  return all<MeterRecord>(db, "SELECT * FROM meter_records WHERE kind = ANY($1) AND subject_id = ANY($2) ORDER BY id", [
    kinds,
    [...ids],
  ]);
}

export async function getTeamBudget(db: Db, teamId: string): Promise<number | null> {
  const r = await one<{ monthly_budget_usd: number }>(db, "SELECT monthly_budget_usd FROM team_budgets WHERE team_id = $1", [
    teamId,
  ]);
  return r?.monthly_budget_usd ?? null;
}

export async function setTeamBudget(db: Db, teamId: string, usd: number | null): Promise<void> {
  if (usd === null) await run(db, "DELETE FROM team_budgets WHERE team_id = $1", [teamId]);
  else
    await run(
      db,
      `INSERT INTO team_budgets (team_id, monthly_budget_usd) VALUES ($1, $2)
       ON CONFLICT (team_id) DO UPDATE SET monthly_budget_usd = excluded.monthly_budget_usd`,
      [teamId, usd],
    );
}

/** created_at and status of the sandboxes created in [fromIso, toIso), of one team or all. */
export function creationsBetween(
  db: Db,
  q: { teamId?: string; fromIso: string; toIso: string },
): Promise<Array<{ created_at: string; status: string }>> {
  const params: unknown[] = [q.fromIso, q.toIso];
  let team = "";
  if (q.teamId !== undefined) {
    params.push(q.teamId);
    team = "team_id = $3 AND";
  }
  return all(
    db,
    `SELECT created_at, status FROM sandboxes WHERE ${team} created_at >= $1 AND created_at < $2 ORDER BY seq`,
    params,
  );
}

/** Sandboxes RUNNING now, of one team or all. */
export async function countRunning(db: Db, teamId?: string): Promise<number> {
  const r =
    teamId === undefined
      ? await one<{ n: number }>(db, "SELECT count(*) AS n FROM sandboxes WHERE status = 'RUNNING'")
      : await one<{ n: number }>(db, "SELECT count(*) AS n FROM sandboxes WHERE status = 'RUNNING' AND team_id = $1", [teamId]);
  return r?.n ?? 0;
}

export async function countByStatus(db: Db): Promise<Record<string, number>> {
  const rows = await all<{ status: string; n: number }>(db, "SELECT status, count(*) AS n FROM sandboxes GROUP BY status");
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export async function durableCheckpointBytes(db: Db): Promise<number> {
  const r = await one<{ n: number }>(db, "SELECT coalesce(sum(stored_bytes), 0) AS n FROM checkpoints WHERE state = 'DURABLE'");
  return r?.n ?? 0;
}
