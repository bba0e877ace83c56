import { randomUUID } from "node:crypto";
import type { Sandbox, TeamLimits, TeamUsage } from "@sandtree/protocol";
import { all, type Db, one, run } from "./pg-db.js";
import type { ApiKeyRow, RevokeOutcome, TeamRow } from "./rows.js";

// Teams, keys, limits, usage and idempotency: the SQL behind PgStore's tenancy methods. The
// admission transaction itself is in pg-store.ts (it needs the sandbox insert).

const KEY_COLUMNS = "id, team_id, prefix, is_admin, created_at, revoked_at";
const ACTIVE_SQL = "status IN ('PENDING', 'PROVISIONING', 'RUNNING')";
const newId = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
const now = () => new Date().toISOString();

export async function createTeam(db: Db, name: string): Promise<TeamRow> {
  const row = { id: newId("team"), name, created_at: now() };
  await run(db, "INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3)", [row.id, row.name, row.created_at]);
  return row;
}

export function getTeamByName(db: Db, name: string): Promise<TeamRow | undefined> {
  return one<TeamRow>(db, "SELECT * FROM teams WHERE name = $1", [name]);
}

export async function countTeams(db: Db): Promise<number> {
  return (await one<{ n: number }>(db, "SELECT count(*) AS n FROM teams"))?.n ?? 0;
}

export function listTeams(db: Db): Promise<TeamRow[]> {
  return all<TeamRow>(db, "SELECT * FROM teams ORDER BY created_at, name");
}

export function getTeam(db: Db, id: string): Promise<TeamRow | undefined> {
  return one<TeamRow>(db, "SELECT * FROM teams WHERE id = $1", [id]);
}

export async function createApiKey(
  db: Db,
  teamId: string,
  keyHash: string,
  prefix: string,
  isAdmin: boolean,
): Promise<ApiKeyRow> {
  const row = { id: newId("key"), team_id: teamId, prefix, created_at: now() };
  await run(db, "INSERT INTO api_keys (id, team_id, key_hash, prefix, is_admin, created_at) VALUES ($1, $2, $3, $4, $5, $6)", [
    row.id,
    teamId,
    keyHash,
    prefix,
    isAdmin,
    row.created_at,
  ]);
  return { ...row, is_admin: isAdmin, revoked_at: null };
}

export function findApiKey(db: Db, keyHash: string): Promise<ApiKeyRow | undefined> {
  return one<ApiKeyRow>(db, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`, [keyHash]);
}

export function getApiKey(db: Db, id: string): Promise<ApiKeyRow | undefined> {
  return one<ApiKeyRow>(db, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [id]);
}

export function listApiKeys(db: Db): Promise<ApiKeyRow[]> {
  return all<ApiKeyRow>(db, `SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`);
}

export async function revokeApiKey(db: Db, id: string): Promise<boolean> {
  return (await run(db, "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [now(), id])) > 0;
}

export async function countActiveAdminKeys(db: Db): Promise<number> {
  return (await one<{ n: number }>(db, "SELECT count(*) AS n FROM api_keys WHERE is_admin AND revoked_at IS NULL"))?.n ?? 0;
}

/** The advisory lock key of revoking admin keys ("adminkey" in ASCII). */
const ADMIN_KEYS_LOCK = 0x61646d696e6b6579n;

/**
 * Inside a transaction holding a transaction-scoped advisory lock: revokes from any number of
 * servers are checked one after another, so two can never remove the last two admin keys.
 */
export async function revokeKeepingAdmin(c: Db, id: string): Promise<RevokeOutcome> {
  await c.query("SELECT pg_advisory_xact_lock($1)", [ADMIN_KEYS_LOCK.toString()]);
  const k = await one<{ is_admin: boolean; revoked_at: string | null }>(
    c,
    "SELECT is_admin, revoked_at FROM api_keys WHERE id = $1",
    [id],
  );
  if (!k) return "not_found";
  if (k.revoked_at) return "already_revoked";
  if (k.is_admin && (await countActiveAdminKeys(c)) <= 1) return "last_admin";
  await revokeApiKey(c, id);
  return "revoked";
}

/** Inside a transaction: the team's row is locked first, so changes of one team's limits queue up. */
export async function updateTeamLimitOverrides(
  c: Db,
  teamId: string,
  change: (current: Partial<TeamLimits>) => Partial<TeamLimits>,
): Promise<Partial<TeamLimits>> {
  await run(c, "SELECT id FROM teams WHERE id = $1 FOR UPDATE", [teamId]);
  const next = change(await getTeamLimitOverrides(c, teamId));
  await setTeamLimitOverrides(c, teamId, next);
  return next;
}

export async function getTeamLimitOverrides(db: Db, teamId: string): Promise<Partial<TeamLimits>> {
  const r = await one<{ limits: string }>(db, "SELECT limits FROM team_limits WHERE team_id = $1", [teamId]);
  return r ? (JSON.parse(r.limits) as Partial<TeamLimits>) : {};
}

export async function setTeamLimitOverrides(db: Db, teamId: string, overrides: Partial<TeamLimits>): Promise<void> {
  await run(
    db,
    "INSERT INTO team_limits (team_id, limits) VALUES ($1, $2) ON CONFLICT (team_id) DO UPDATE SET limits = excluded.limits",
    [teamId, JSON.stringify(overrides)],
  );
}

export async function teamUsage(db: Db, teamId: string, nowMs: number): Promise<TeamUsage> {
  const r = await one<{ n: number; cpu: number; mem: number; disk: number; hour: number; burst: number }>(
    db,
    `SELECT count(*) FILTER (WHERE ${ACTIVE_SQL}) AS n,
       coalesce(sum(cpu_cores) FILTER (WHERE ${ACTIVE_SQL}), 0) AS cpu,
       coalesce(sum(memory_gb) FILTER (WHERE ${ACTIVE_SQL}), 0) AS mem,
       coalesce(sum(disk_size_gb) FILTER (WHERE ${ACTIVE_SQL}), 0) AS disk,
       count(*) FILTER (WHERE created_at > $2) AS hour,
       count(*) FILTER (WHERE created_at > $3) AS burst
     FROM sandboxes WHERE team_id = $1`,
    [teamId, new Date(nowMs - 3_600_000).toISOString(), new Date(nowMs - 10_000).toISOString()],
  );
  return {
    active_sandboxes: r?.n ?? 0,
    vcpus: r?.cpu ?? 0,
    memory_gb: r?.mem ?? 0,
    storage_gb: r?.disk ?? 0,
    creations_last_hour: r?.hour ?? 0,
    creations_last_10s: r?.burst ?? 0,
  };
}

export async function nthCreationSince(db: Db, teamId: string, sinceIso: string, n: number): Promise<string | undefined> {
  const r = await one<{ created_at: string }>(
    db,
    "SELECT created_at FROM sandboxes WHERE team_id = $1 AND created_at > $2 ORDER BY created_at, seq LIMIT 1 OFFSET $3",
    [teamId, sinceIso, n],
  );
  return r?.created_at;
}

export async function getSealedSecrets(db: Db, sandboxId: string): Promise<string | undefined> {
  return (await one<{ sealed: string }>(db, "SELECT sealed FROM sandbox_secrets WHERE sandbox_id = $1", [sandboxId]))?.sealed;
}

export async function findIdempotent(
  db: Db,
  teamId: string,
  key: string,
  notBeforeIso: string,
  get: (db: Db, id: string) => Promise<Sandbox | undefined>,
): Promise<{ sandbox: Sandbox; requestMac: string } | undefined> {
  const prior = await one<{ request_mac: string; sandbox_id: string }>(
    db,
    "SELECT request_mac, sandbox_id FROM idempotency_keys WHERE team_id = $1 AND key = $2 AND created_at > $3",
    [teamId, key, notBeforeIso],
  );
  const sandbox = prior ? await get(db, prior.sandbox_id) : undefined;
  return prior && sandbox ? { sandbox, requestMac: prior.request_mac } : undefined;
}

/** The rest of an admission, inside its transaction: sealed secrets and the idempotency key. */
export async function recordAdmission(
  db: Db,
  s: Sandbox,
  sealedSecrets: string | null,
  idempotency: { key: string; requestMac: string } | null,
): Promise<void> {
  if (sealedSecrets !== null) {
    await run(db, "INSERT INTO sandbox_secrets (sandbox_id, sealed) VALUES ($1, $2)", [s.id, sealedSecrets]);
  }
  if (idempotency) {
    await run(
      db,
      `INSERT INTO idempotency_keys (team_id, key, request_mac, sandbox_id, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (team_id, key) DO UPDATE SET request_mac = excluded.request_mac, sandbox_id = excluded.sandbox_id,
         created_at = excluded.created_at`,
      [s.team_id, idempotency.key, idempotency.requestMac, s.id, s.created_at],
    );
  }
}
