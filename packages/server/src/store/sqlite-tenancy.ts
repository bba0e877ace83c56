import type { Sandbox, TeamLimits, TeamUsage } from "@sandtree/protocol";
import type Database from "better-sqlite3";
import type { AdmissionResult, ApiKeyRow, RevokeOutcome, SandboxAdmission, TeamRow } from "./rows.js";

// Teams, keys, limits, idempotency and sealed secrets: the SQL behind SqliteStore's tenancy methods.

export const TENANCY_MIGRATION = `
  CREATE TABLE team_limits (team_id TEXT PRIMARY KEY REFERENCES teams(id), limits TEXT NOT NULL);
  CREATE TABLE idempotency_keys (team_id TEXT NOT NULL, key TEXT NOT NULL, request_mac TEXT NOT NULL,
    sandbox_id TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (team_id, key));
  CREATE TABLE sandbox_secrets (sandbox_id TEXT PRIMARY KEY, sealed TEXT NOT NULL);
  ALTER TABLE sandboxes ADD COLUMN secrets TEXT NOT NULL DEFAULT '{}';
  CREATE INDEX sandboxes_team_created ON sandboxes(team_id, created_at);`;

type KeyRowRaw = Omit<ApiKeyRow, "is_admin"> & { is_admin: number };
const KEY_COLUMNS = "id, team_id, prefix, is_admin, created_at, revoked_at";
const toKey = (r: KeyRowRaw): ApiKeyRow => ({ ...r, is_admin: r.is_admin === 1 });
const ACTIVE_SQL = "status IN ('PENDING', 'PROVISIONING', 'RUNNING')";

export function listTeams(db: Database.Database): TeamRow[] {
  return db.prepare("SELECT * FROM teams ORDER BY created_at, name").all() as TeamRow[];
}

export function getTeam(db: Database.Database, id: string): TeamRow | undefined {
  return db.prepare("SELECT * FROM teams WHERE id = ?").get(id) as TeamRow | undefined;
}

export function getApiKey(db: Database.Database, id: string): ApiKeyRow | undefined {
  const r = db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`).get(id) as KeyRowRaw | undefined;
  return r ? toKey(r) : undefined;
}

export function listApiKeys(db: Database.Database): ApiKeyRow[] {
  return (db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`).all() as KeyRowRaw[]).map(toKey);
}

export function revokeApiKey(db: Database.Database, id: string): boolean {
  return (
    db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(new Date().toISOString(), id)
      .changes > 0
  );
}

export function countActiveAdminKeys(db: Database.Database): number {
  return (db.prepare("SELECT COUNT(*) AS n FROM api_keys WHERE is_admin = 1 AND revoked_at IS NULL").get() as { n: number }).n;
}

/** One transaction (better-sqlite3's are synchronous and exclusive in the file). */
export function revokeKeepingAdmin(db: Database.Database, id: string): RevokeOutcome {
  return db.transaction((): RevokeOutcome => {
    const k = db.prepare("SELECT is_admin, revoked_at FROM api_keys WHERE id = ?").get(id) as
      | { is_admin: number; revoked_at: string | null }
      | undefined;
    if (!k) return "not_found";
    if (k.revoked_at) return "already_revoked";
    if (k.is_admin === 1 && countActiveAdminKeys(db) <= 1) return "last_admin";
    revokeApiKey(db, id);
    return "revoked";
  })();
}

export function updateTeamLimitOverrides(
  db: Database.Database,
  teamId: string,
  change: (current: Partial<TeamLimits>) => Partial<TeamLimits>,
): Partial<TeamLimits> {
  return db.transaction(() => {
    const next = change(getTeamLimitOverrides(db, teamId));
    setTeamLimitOverrides(db, teamId, next);
    return next;
  })();
}

export function getTeamLimitOverrides(db: Database.Database, teamId: string): Partial<TeamLimits> {
  const r = db.prepare("SELECT limits FROM team_limits WHERE team_id = ?").get(teamId) as { limits: string } | undefined;
  return r ? (JSON.parse(r.limits) as Partial<TeamLimits>) : {};
}

export function setTeamLimitOverrides(db: Database.Database, teamId: string, overrides: Partial<TeamLimits>): void {
  db.prepare(
    "INSERT INTO team_limits (team_id, limits) VALUES (?, ?) ON CONFLICT(team_id) DO UPDATE SET limits = excluded.limits",
  ).run(teamId, JSON.stringify(overrides));
}

export function teamUsage(db: Database.Database, teamId: string, nowMs: number): TeamUsage {
  const active = db
    .prepare(
      `SELECT COUNT(*) AS n, COALESCE(SUM(cpu_cores), 0) AS cpu, COALESCE(SUM(memory_gb), 0) AS mem,
         COALESCE(SUM(disk_size_gb), 0) AS disk FROM sandboxes WHERE team_id = ? AND ${ACTIVE_SQL}`,
    )
    .get(teamId) as { n: number; cpu: number; mem: number; disk: number };
  const since = db.prepare("SELECT COUNT(*) AS n FROM sandboxes WHERE team_id = ? AND created_at > ?");
  const hour = since.get(teamId, new Date(nowMs - 3_600_000).toISOString()) as { n: number };
  const burst = since.get(teamId, new Date(nowMs - 10_000).toISOString()) as { n: number };
  return {
    active_sandboxes: active.n,
    vcpus: active.cpu,
    memory_gb: active.mem,
    storage_gb: active.disk,
    creations_last_hour: hour.n,
    creations_last_10s: burst.n,
  };
}

export function nthCreationSince(db: Database.Database, teamId: string, sinceIso: string, n: number): string | undefined {
  const r = db
    .prepare("SELECT created_at FROM sandboxes WHERE team_id = ? AND created_at > ? ORDER BY created_at LIMIT 1 OFFSET ?")
    .get(teamId, sinceIso, n) as { created_at: string } | undefined;
  return r?.created_at;
}

export function getSealedSecrets(db: Database.Database, sandboxId: string): string | undefined {
  const r = db.prepare("SELECT sealed FROM sandbox_secrets WHERE sandbox_id = ?").get(sandboxId) as
    | { sealed: string }
    | undefined;
  return r?.sealed;
}

export function findIdempotent(
  db: Database.Database,
  teamId: string,
  key: string,
  notBeforeIso: string,
  get: (id: string) => Sandbox | undefined,
): { sandbox: Sandbox; requestMac: string } | undefined {
  const prior = db
    .prepare("SELECT request_mac, sandbox_id FROM idempotency_keys WHERE team_id = ? AND key = ? AND created_at > ?")
    .get(teamId, key, notBeforeIso) as { request_mac: string; sandbox_id: string } | undefined;
  const sandbox = prior ? get(prior.sandbox_id) : undefined;
  return prior && sandbox ? { sandbox, requestMac: prior.request_mac } : undefined;
}

export function admitSandbox(
  db: Database.Database,
  a: SandboxAdmission,
  io: { insert(s: Sandbox): void; get(id: string): Sandbox | undefined },
): AdmissionResult {
  const s = a.sandbox;
  // IMMEDIATE: take the write lock before reading usage, so another process cannot interleave.
  return db
    .transaction((): AdmissionResult => {
      if (a.idempotency) {
        const prior = findIdempotent(db, s.team_id, a.idempotency.key, a.idempotency.notBeforeIso, io.get);
        if (prior) return { created: false, ...prior };
      }
      a.check(teamUsage(db, s.team_id, a.nowMs));
      io.insert(s);
      db.prepare("UPDATE sandboxes SET secrets = ? WHERE id = ?").run(JSON.stringify(s.secrets ?? {}), s.id);
      if (a.sealedSecrets !== null) {
        db.prepare("INSERT INTO sandbox_secrets (sandbox_id, sealed) VALUES (?, ?)").run(s.id, a.sealedSecrets);
      }
      if (a.idempotency) {
        db.prepare(
          `INSERT INTO idempotency_keys (team_id, key, request_mac, sandbox_id, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(team_id, key) DO UPDATE SET request_mac = excluded.request_mac, sandbox_id = excluded.sandbox_id,
           created_at = excluded.created_at`,
        ).run(s.team_id, a.idempotency.key, a.idempotency.requestMac, s.id, s.created_at);
      }
      return { created: true, sandbox: io.get(s.id) ?? s };
    })
    .immediate();
}
