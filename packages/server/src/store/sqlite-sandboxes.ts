import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import type Database from "better-sqlite3";
import { sandboxFromRow as fromRow, type SandboxFilter, type SandboxPatch, type SandboxTableRow as SandboxRow } from "./rows.js";
import { SqliteWhere, sqliteUpdate } from "./sqlite-sql.js";

// The SQL behind SqliteStore's sandbox rows and their events.

const now = () => new Date().toISOString();

/** Every field of the sandbox; the optional ones absent are null, secrets (masked) {}. */
export function insertSandbox(db: Database.Database, s: Sandbox): void {
  db.prepare(
    `INSERT INTO sandboxes (id, team_id, name, image, image_digest, status, cpu_cores, memory_gb, disk_size_gb,
          environment_vars, labels, start_command, accel, error_reason, created_at, updated_at, started_at, terminated_at,
          secrets, timeout_minutes, idle_timeout_minutes, expires_at, last_activity_at, start_path, source_checkpoint_id,
          head_checkpoint_id, display, nested_virtualization, error_code)
         VALUES (@id, @team_id, @name, @image, @image_digest, @status, @cpu_cores, @memory_gb, @disk_size_gb,
          @environment_vars, @labels, @start_command, @accel, @error_reason, @created_at, @updated_at, @started_at, @terminated_at,
          @secrets, @timeout_minutes, @idle_timeout_minutes, @expires_at, @last_activity_at, @start_path, @source_checkpoint_id,
          @head_checkpoint_id, @display, @nested_virtualization, @error_code)`,
  ).run({
    ...s,
    environment_vars: JSON.stringify(s.environment_vars),
    labels: JSON.stringify(s.labels),
    secrets: JSON.stringify(s.secrets ?? {}),
    timeout_minutes: s.timeout_minutes ?? null,
    idle_timeout_minutes: s.idle_timeout_minutes ?? null,
    expires_at: s.expires_at ?? null,
    last_activity_at: s.last_activity_at ?? null,
    start_path: s.start_path ?? null,
    source_checkpoint_id: s.source_checkpoint_id ?? null,
    head_checkpoint_id: s.head_checkpoint_id ?? null,
    display: s.display ?? null,
    nested_virtualization: s.nested_virtualization ? 1 : 0,
    error_code: s.error_code ?? null,
  });
}

export function listSandboxes(
  db: Database.Database,
  teamId: string,
  filter: SandboxFilter,
): { sandboxes: Sandbox[]; lastSeq: number | null } {
  const where = new SqliteWhere().and("team_id = ?", teamId);
  if (filter.status) where.and("status = ?", filter.status);
  for (const [k, v] of Object.entries(filter.labels ?? {}))
    where.and("json_extract(labels, ?) = ?", `$."${k.replaceAll('"', "")}"`, v);
  if (filter.hostId !== undefined) where.and("id IN (SELECT sandbox_id FROM placements WHERE host_id = ?)", filter.hostId);
  if (filter.beforeSeq !== undefined) where.and("seq < ?", filter.beforeSeq);
  const rows = db
    .prepare(`SELECT * FROM sandboxes ${where.sql} ORDER BY seq DESC LIMIT ?`)
    .all(...where.params, filter.limit) as SandboxRow[];
  const last = rows.at(-1);
  return { sandboxes: rows.map(fromRow), lastSeq: rows.length === filter.limit && last ? last.seq : null };
}

export function listSandboxesByStatus(db: Database.Database, statuses: readonly SandboxStatus[]): Sandbox[] {
  const rows = db
    .prepare(`SELECT * FROM sandboxes WHERE status IN (${statuses.map(() => "?").join(",")}) ORDER BY seq`)
    .all(...statuses) as SandboxRow[];
  return rows.map(fromRow);
}

/** The UPDATE of a sandbox's fields (updated_at set), only from the given statuses when there are any. */
export function sandboxUpdate(
  id: string,
  patch: SandboxPatch,
  from?: readonly SandboxStatus[],
): { sql: string; params: Record<string, unknown> } {
  const fields: Record<string, unknown> = { ...patch, updated_at: now() };
  if (patch.environment_vars) fields.environment_vars = JSON.stringify(patch.environment_vars);
  if (patch.labels) fields.labels = JSON.stringify(patch.labels);
  return sqliteUpdate("sandboxes", fields, id, from && { column: "status", from });
}

export function addEvent(db: Database.Database, sandboxId: string, message: string): void {
  db.prepare("INSERT INTO sandbox_events (sandbox_id, at, message) VALUES (?, ?, ?)").run(sandboxId, now(), message);
}

export function listEvents(db: Database.Database, sandboxId: string, limit: number): Array<{ at: string; message: string }> {
  const rows = db
    .prepare("SELECT at, message FROM sandbox_events WHERE sandbox_id = ? ORDER BY id DESC LIMIT ?")
    .all(sandboxId, limit) as Array<{ at: string; message: string }>;
  return rows.reverse();
}
