import { randomUUID } from "node:crypto";
import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import Database from "better-sqlite3";
import type { ApiKeyRow, SandboxFilter, SandboxPatch, Store, TeamRow } from "./store.js";

/**
 * Schema migrations, applied once each by name (recorded in `schema_migrations`), so features
 * developed side by side can each add their own without fighting over a version number.
 * Never edit an applied migration: add a new one.
 */
const MIGRATIONS: Array<[name: string, sql: string]> = [
  [
    "0001-core",
    `CREATE TABLE teams (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
   CREATE TABLE api_keys (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id),
     key_hash TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0,
     created_at TEXT NOT NULL, revoked_at TEXT);
   CREATE TABLE sandboxes (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
     team_id TEXT NOT NULL REFERENCES teams(id), name TEXT, image TEXT NOT NULL, image_digest TEXT,
     status TEXT NOT NULL, cpu_cores INTEGER NOT NULL, memory_gb REAL NOT NULL, disk_size_gb INTEGER NOT NULL,
     environment_vars TEXT NOT NULL, labels TEXT NOT NULL, start_command TEXT, accel TEXT, error_reason TEXT,
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL, started_at TEXT, terminated_at TEXT);
   CREATE INDEX sandboxes_team_status ON sandboxes(team_id, status);
   CREATE TABLE sandbox_events (id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL,
     at TEXT NOT NULL, message TEXT NOT NULL);
   CREATE INDEX sandbox_events_sandbox ON sandbox_events(sandbox_id, id);`,
  ],
];

type SandboxRow = Omit<Sandbox, "environment_vars" | "labels"> & { seq: number; environment_vars: string; labels: string };

function fromRow(r: SandboxRow): Sandbox {
  const { seq: _seq, ...rest } = r;
  return { ...rest, environment_vars: JSON.parse(r.environment_vars), labels: JSON.parse(r.labels) };
}

const now = () => new Date().toISOString();

export class SqliteStore implements Store {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("foreign_keys = ON");
    this.db.pragma("busy_timeout = 5000");
    this.migrate();
  }

  private migrate(): void {
    this.db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
    const applied = new Set(
      (this.db.prepare("SELECT name FROM schema_migrations").all() as Array<{ name: string }>).map((r) => r.name),
    );
    for (const [name, sql] of MIGRATIONS) {
      if (applied.has(name)) continue;
      this.db.transaction(() => {
        this.db.exec(sql);
        this.db.prepare("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)").run(name, now());
      })();
    }
  }

  createTeam(name: string): TeamRow {
    const row = { id: `team_${randomUUID().replaceAll("-", "").slice(0, 16)}`, name, created_at: now() };
    this.db.prepare("INSERT INTO teams (id, name, created_at) VALUES (@id, @name, @created_at)").run(row);
    return row;
  }

  getTeamByName(name: string): TeamRow | undefined {
    return this.db.prepare("SELECT * FROM teams WHERE name = ?").get(name) as TeamRow | undefined;
  }

  countTeams(): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM teams").get() as { n: number }).n;
  }

  createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): ApiKeyRow {
    const row = { id: `key_${randomUUID().replaceAll("-", "").slice(0, 16)}`, team_id: teamId, prefix, created_at: now() };
    this.db
      .prepare("INSERT INTO api_keys (id, team_id, key_hash, prefix, is_admin, created_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(row.id, teamId, keyHash, prefix, isAdmin ? 1 : 0, row.created_at);
    return { ...row, is_admin: isAdmin, revoked_at: null };
  }

  findApiKey(keyHash: string): ApiKeyRow | undefined {
    const r = this.db
      .prepare("SELECT id, team_id, prefix, is_admin, created_at, revoked_at FROM api_keys WHERE key_hash = ?")
      .get(keyHash) as (Omit<ApiKeyRow, "is_admin"> & { is_admin: number }) | undefined;
    return r ? { ...r, is_admin: r.is_admin === 1 } : undefined;
  }

  insertSandbox(s: Sandbox): void {
    this.db
      .prepare(
        `INSERT INTO sandboxes (id, team_id, name, image, image_digest, status, cpu_cores, memory_gb, disk_size_gb,
          environment_vars, labels, start_command, accel, error_reason, created_at, updated_at, started_at, terminated_at)
         VALUES (@id, @team_id, @name, @image, @image_digest, @status, @cpu_cores, @memory_gb, @disk_size_gb,
          @environment_vars, @labels, @start_command, @accel, @error_reason, @created_at, @updated_at, @started_at, @terminated_at)`,
      )
      .run({ ...s, environment_vars: JSON.stringify(s.environment_vars), labels: JSON.stringify(s.labels) });
  }

  getSandbox(id: string, teamId?: string): Sandbox | undefined {
    const r = (
      teamId === undefined
        ? this.db.prepare("SELECT * FROM sandboxes WHERE id = ?").get(id)
        : this.db.prepare("SELECT * FROM sandboxes WHERE id = ? AND team_id = ?").get(id, teamId)
    ) as SandboxRow | undefined;
    return r ? fromRow(r) : undefined;
  }

  listSandboxes(teamId: string, filter: SandboxFilter): { sandboxes: Sandbox[]; lastSeq: number | null } {
    const where = ["team_id = ?"];
    const params: unknown[] = [teamId];
    if (filter.status) {
      where.push("status = ?");
      params.push(filter.status);
    }
    for (const [k, v] of Object.entries(filter.labels ?? {})) {
      where.push("json_extract(labels, ?) = ?");
      params.push(`$."${k.replaceAll('"', "")}"`, v);
    }
    if (filter.beforeSeq !== undefined) {
      where.push("seq < ?");
      params.push(filter.beforeSeq);
    }
    params.push(filter.limit);
    const rows = this.db
      .prepare(`SELECT * FROM sandboxes WHERE ${where.join(" AND ")} ORDER BY seq DESC LIMIT ?`)
      .all(...params) as SandboxRow[];
    const last = rows.at(-1);
    return { sandboxes: rows.map(fromRow), lastSeq: rows.length === filter.limit && last ? last.seq : null };
  }

  listSandboxesByStatus(statuses: readonly SandboxStatus[]): Sandbox[] {
    const rows = this.db
      .prepare(`SELECT * FROM sandboxes WHERE status IN (${statuses.map(() => "?").join(",")}) ORDER BY seq`)
      .all(...statuses) as SandboxRow[];
    return rows.map(fromRow);
  }

  updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): boolean {
    const fields: Record<string, unknown> = { ...patch, updated_at: now() };
    if (patch.environment_vars) fields.environment_vars = JSON.stringify(patch.environment_vars);
    if (patch.labels) fields.labels = JSON.stringify(patch.labels);
    const sets = Object.keys(fields).map((k) => `${k} = @${k}`);
    let sql = `UPDATE sandboxes SET ${sets.join(", ")} WHERE id = @__id`;
    const params: Record<string, unknown> = { ...fields, __id: id };
    if (from && from.length > 0) {
      sql += ` AND status IN (${from.map((_, i) => `@__from${i}`).join(",")})`;
      from.forEach((s, i) => {
        params[`__from${i}`] = s;
      });
    }
    return this.db.prepare(sql).run(params).changes > 0;
  }

  addEvent(sandboxId: string, message: string): void {
    this.db.prepare("INSERT INTO sandbox_events (sandbox_id, at, message) VALUES (?, ?, ?)").run(sandboxId, now(), message);
  }

  listEvents(sandboxId: string, limit: number): Array<{ at: string; message: string }> {
    const rows = this.db
      .prepare("SELECT at, message FROM sandbox_events WHERE sandbox_id = ? ORDER BY id DESC LIMIT ?")
      .all(sandboxId, limit) as Array<{ at: string; message: string }>;
    return rows.reverse();
  }

  close(): void {
    this.db.close();
  }
}
