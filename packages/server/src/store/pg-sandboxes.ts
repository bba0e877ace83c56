import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import { all, type Db, insertSql, one, run, updateSql } from "./pg-db.js";
import { sandboxFromRow as fromRow, type SandboxFilter, type SandboxPatch, type SandboxTableRow as SandboxRow } from "./rows.js";

// The SQL behind PgStore's sandbox and event methods (status changes and their metering:
// pg-store.ts, which wraps them in a transaction).

const COLUMNS = [
  "id",
  "team_id",
  "name",
  "image",
  "image_digest",
  "status",
  "cpu_cores",
  "memory_gb",
  "disk_size_gb",
  "environment_vars",
  "labels",
  "start_command",
  "display",
  "nested_virtualization",
  "accel",
  "error_reason",
  "error_code",
  "created_at",
  "updated_at",
  "started_at",
  "terminated_at",
  "secrets",
  "timeout_minutes",
  "idle_timeout_minutes",
  "expires_at",
  "last_activity_at",
  "start_path",
  "source_checkpoint_id",
  "head_checkpoint_id",
];

/** Every field of the sandbox; the optional ones absent are null, secrets (masked) {}. */
export async function insertSandbox(db: Db, s: Sandbox): Promise<void> {
  const row = {
    ...s,
    environment_vars: JSON.stringify(s.environment_vars),
    labels: JSON.stringify(s.labels),
    secrets: JSON.stringify(s.secrets ?? {}),
    nested_virtualization: s.nested_virtualization === true,
    error_code: s.error_code ?? null,
  } as Record<string, unknown>;
  await run(db, ...insertSql("sandboxes", row, COLUMNS));
}

export async function getSandbox(db: Db, id: string, teamId?: string): Promise<Sandbox | undefined> {
  const r =
    teamId === undefined
      ? await one<SandboxRow>(db, "SELECT * FROM sandboxes WHERE id = $1", [id])
      : await one<SandboxRow>(db, "SELECT * FROM sandboxes WHERE id = $1 AND team_id = $2", [id, teamId]);
  return r ? fromRow(r) : undefined;
}

export async function listSandboxes(
  db: Db,
  teamId: string,
  filter: SandboxFilter,
): Promise<{ sandboxes: Sandbox[]; lastSeq: number | null }> {
  const params: unknown[] = [teamId];
  const where = ["team_id = $1"];
  const add = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  if (filter.status) where.push(`status = ${add(filter.status)}`);
  for (const [k, v] of Object.entries(filter.labels ?? {})) {
    where.push(`(labels::jsonb ->> ${add(k.replaceAll('"', ""))}) = ${add(v)}`);
  }
  if (filter.hostId !== undefined) where.push(`id IN (SELECT sandbox_id FROM placements WHERE host_id = ${add(filter.hostId)})`);
  if (filter.beforeSeq !== undefined) where.push(`seq < ${add(filter.beforeSeq)}`);
  const limit = add(filter.limit);
  const rows = await all<SandboxRow>(
    db,
    `SELECT * FROM sandboxes WHERE ${where.join(" AND ")} ORDER BY seq DESC LIMIT ${limit}`,
    params,
  );
  const last = rows.at(-1);
  return { sandboxes: rows.map(fromRow), lastSeq: rows.length === filter.limit && last ? last.seq : null };
}

export async function listSandboxesByStatus(db: Db, statuses: readonly SandboxStatus[]): Promise<Sandbox[]> {
  const rows = await all<SandboxRow>(db, "SELECT * FROM sandboxes WHERE status = ANY($1) ORDER BY seq", [[...statuses]]);
  return rows.map(fromRow);
}

/** The conditional UPDATE (`from`); true when a row changed. Takes the row's lock until the transaction ends. */
export async function updateSandbox(db: Db, id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): Promise<boolean> {
  const fields: Record<string, unknown> = { ...patch, updated_at: new Date().toISOString() };
  if (patch.environment_vars) fields.environment_vars = JSON.stringify(patch.environment_vars);
  if (patch.labels) fields.labels = JSON.stringify(patch.labels);
  if (patch.secrets) fields.secrets = JSON.stringify(patch.secrets);
  return (await run(db, ...updateSql("sandboxes", fields, id, from && { column: "status", from }))) > 0;
}

export async function touchSandbox(db: Db, id: string, at: string): Promise<void> {
  await run(db, "UPDATE sandboxes SET last_activity_at = $1 WHERE id = $2", [at, id]);
}

export async function addEvent(db: Db, sandboxId: string, message: string): Promise<void> {
  await run(db, "INSERT INTO sandbox_events (sandbox_id, at, message) VALUES ($1, $2, $3)", [
    sandboxId,
    new Date().toISOString(),
    message,
  ]);
}

export async function listEvents(db: Db, sandboxId: string, limit: number): Promise<Array<{ at: string; message: string }>> {
  const rows = await all<{ at: string; message: string }>(
    db,
    "SELECT at, message FROM sandbox_events WHERE sandbox_id = $1 ORDER BY id DESC LIMIT $2",
    [sandboxId, limit],
  );
  return rows.reverse();
}
