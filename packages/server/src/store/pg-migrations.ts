import type pg from "pg";
import { PG_IMAGE_ALIASES_MIGRATION } from "./image-aliases.js";
import { JOB_TAILS_MIGRATION } from "./job-tails.js";
import { KEY_FINGERPRINTS_MIGRATION } from "./key-fingerprints.js";
import { PG_CHECKPOINT_BASE_NAMES_MIGRATION } from "./pg-checkpoints.js";
import { PG_HOST_URLS_MIGRATION } from "./pg-host-urls.js";
import { PG_HOSTS_MIGRATION, PG_PLACED_BY_MIGRATION } from "./pg-hosts.js";
import { PG_METER_HOURS_MIGRATION } from "./usage-hours.js";
import { METER_OPEN_MIGRATION } from "./usage-open.js";
import { METER_WINDOW_MIGRATION } from "./usage-sums.js";
import { PG_VOLUMES_MIGRATION, VOLUME_HOMES_MIGRATION, VOLUME_SYNCS_MIGRATION } from "./volume-rows.js";

// PostgreSQL's schema: its own SQL, with the columns and meanings of SQLite's (times are ISO-8601
// text as there, compared and sorted bytewise (COLLATE "C", whatever the database's locale),
// booleans are booleans, 64-bit sizes and millisecond times bigint). Migrations
// are applied once each by name, recorded in `schema_migrations`, under a session advisory lock:
// servers that start together against one database wait for each other, and the later ones find
// everything applied. Never edit an applied migration: add a new one.

/** The advisory lock key of the migrations (any constant 64-bit number; "sandtree" in ASCII). */
export const MIGRATION_LOCK = 0x73616e6474726565n;

const CORE = `
  CREATE TABLE teams (id TEXT PRIMARY KEY, name TEXT COLLATE "C" NOT NULL UNIQUE, created_at TEXT COLLATE "C" NOT NULL);
  CREATE TABLE api_keys (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id),
    key_hash TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, is_admin BOOLEAN NOT NULL DEFAULT false,
    created_at TEXT COLLATE "C" NOT NULL, revoked_at TEXT);
  CREATE TABLE sandboxes (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    team_id TEXT NOT NULL REFERENCES teams(id), name TEXT, image TEXT NOT NULL, image_digest TEXT,
    status TEXT NOT NULL, cpu_cores INTEGER NOT NULL, memory_gb DOUBLE PRECISION NOT NULL,
    disk_size_gb INTEGER NOT NULL, environment_vars TEXT NOT NULL, labels TEXT NOT NULL, start_command TEXT,
    accel TEXT, error_reason TEXT, created_at TEXT COLLATE "C" NOT NULL, updated_at TEXT NOT NULL, started_at TEXT,
    terminated_at TEXT, secrets TEXT NOT NULL DEFAULT '{}', timeout_minutes DOUBLE PRECISION,
    idle_timeout_minutes DOUBLE PRECISION, expires_at TEXT, last_activity_at TEXT, start_path TEXT,
    source_checkpoint_id TEXT, head_checkpoint_id TEXT);
  CREATE INDEX sandboxes_team_status ON sandboxes(team_id, status);
  CREATE INDEX sandboxes_team_created ON sandboxes(team_id, created_at);
  CREATE INDEX sandboxes_status ON sandboxes(status);
  CREATE TABLE sandbox_events (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sandbox_id TEXT NOT NULL,
    at TEXT NOT NULL, message TEXT NOT NULL);
  CREATE INDEX sandbox_events_sandbox ON sandbox_events(sandbox_id, id);
  CREATE TABLE team_limits (team_id TEXT PRIMARY KEY REFERENCES teams(id), limits TEXT NOT NULL);
  CREATE TABLE idempotency_keys (team_id TEXT NOT NULL, key TEXT NOT NULL, request_mac TEXT NOT NULL,
    sandbox_id TEXT NOT NULL, created_at TEXT COLLATE "C" NOT NULL, PRIMARY KEY (team_id, key));
  CREATE TABLE sandbox_secrets (sandbox_id TEXT PRIMARY KEY, sealed TEXT NOT NULL);
  CREATE TABLE jobs (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    team_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, command TEXT NOT NULL, status TEXT NOT NULL,
    exit_code INTEGER, stdout_bytes BIGINT NOT NULL DEFAULT 0, stderr_bytes BIGINT NOT NULL DEFAULT 0,
    wrapper_pid INTEGER, kill_requested BOOLEAN NOT NULL DEFAULT false, error_reason TEXT,
    started_at TEXT NOT NULL, ended_at TEXT);
  CREATE INDEX jobs_sandbox ON jobs(sandbox_id, seq);`;

const CHECKPOINTS = `
  CREATE TABLE checkpoints (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    team_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, parent_id TEXT, state TEXT NOT NULL,
    depth INTEGER NOT NULL, image TEXT NOT NULL, image_digest TEXT, base_path TEXT NOT NULL,
    disk_size_bytes BIGINT NOT NULL, stored_bytes BIGINT NOT NULL DEFAULT 0, sha256 TEXT,
    blob_key TEXT, error TEXT, created_at TEXT COLLATE "C" NOT NULL, updated_at TEXT NOT NULL, expires_at TEXT,
    mem_key TEXT, mem_sha256 TEXT, cpu_cores INTEGER, memory_mb INTEGER);
  CREATE INDEX checkpoints_team ON checkpoints(team_id, seq);
  CREATE INDEX checkpoints_sandbox ON checkpoints(sandbox_id, seq);
  CREATE INDEX checkpoints_parent ON checkpoints(parent_id);
  CREATE TABLE exposed_ports (sandbox_id TEXT NOT NULL, port INTEGER NOT NULL, token_sha256 TEXT NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL, PRIMARY KEY (sandbox_id, port));
  CREATE TABLE sandbox_networks (sandbox_id TEXT PRIMARY KEY, enabled BOOLEAN NOT NULL,
    slot INTEGER, mode TEXT NOT NULL, allowlist TEXT NOT NULL, denylist TEXT NOT NULL,
    tunnels TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 1, applied BOOLEAN NOT NULL DEFAULT false,
    updated_at TEXT NOT NULL);
  CREATE UNIQUE INDEX sandbox_networks_slot ON sandbox_networks(slot) WHERE slot IS NOT NULL;`;

const METERING = `
  CREATE TABLE meter_records (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind TEXT NOT NULL,
    subject_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, team_id TEXT NOT NULL, state TEXT NOT NULL,
    vcpus DOUBLE PRECISION NOT NULL DEFAULT 0, memory_gib DOUBLE PRECISION NOT NULL DEFAULT 0,
    disk_gib DOUBLE PRECISION NOT NULL DEFAULT 0, stored_bytes BIGINT NOT NULL DEFAULT 0,
    start_ms BIGINT NOT NULL, end_ms BIGINT);
  CREATE INDEX meter_records_team ON meter_records(team_id, start_ms);
  CREATE INDEX meter_records_subject ON meter_records(subject_id, kind);
  CREATE TABLE team_budgets (team_id TEXT PRIMARY KEY, monthly_budget_usd DOUBLE PRECISION NOT NULL);`;

export const PG_MIGRATIONS: ReadonlyArray<readonly [name: string, sql: string]> = [
  ["0001-core", CORE],
  ["0002-checkpoints-networks-ports", CHECKPOINTS],
  ["0003-metering", METERING],
  ["0004-fleet-hosts", PG_HOSTS_MIGRATION],
  ["0005-host-urls", PG_HOST_URLS_MIGRATION],
  ["0006-key-fingerprints", KEY_FINGERPRINTS_MIGRATION],
  ["0007-placed-by", PG_PLACED_BY_MIGRATION],
  ["0008-image-aliases", PG_IMAGE_ALIASES_MIGRATION],
  ["0009-display", "ALTER TABLE sandboxes ADD COLUMN display TEXT;"],
  [
    "0010-nested-virtualization",
    "ALTER TABLE sandboxes ADD COLUMN nested_virtualization BOOLEAN NOT NULL DEFAULT false; ALTER TABLE checkpoints ADD COLUMN machine TEXT;",
  ],
  ["0011-volumes", PG_VOLUMES_MIGRATION],
  ["0012-meter-window", METER_WINDOW_MIGRATION],
  ["0013-meter-hours", PG_METER_HOURS_MIGRATION],
  ["0014-volume-homes", VOLUME_HOMES_MIGRATION],
  ["0015-volume-syncs", VOLUME_SYNCS_MIGRATION],
  ["0016-meter-open", METER_OPEN_MIGRATION],
  ["0017-job-tails", JOB_TAILS_MIGRATION],
  ["0018-error-code", "ALTER TABLE sandboxes ADD COLUMN error_code TEXT;"],
  ["0019-base-names", PG_CHECKPOINT_BASE_NAMES_MIGRATION],
];

/**
 * Applies the migrations not yet recorded, each in its own transaction, holding the migration
 * advisory lock for the whole run (released on the way out, and by PostgreSQL if the connection
 * dies). Answers the names it applied.
 */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const c = await pool.connect();
  const applied: string[] = [];
  try {
    await c.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK.toString()]);
    try {
      await c.query("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
      const done = new Set((await c.query<{ name: string }>("SELECT name FROM schema_migrations")).rows.map((r) => r.name));
      for (const [name, sql] of PG_MIGRATIONS) {
        if (done.has(name)) continue;
        await c.query("BEGIN");
        try {
          await c.query(sql);
          await c.query("INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)", [name, new Date().toISOString()]);
          await c.query("COMMIT");
        } catch (err) {
          await c.query("ROLLBACK").catch(() => {});
          throw err;
        }
        applied.push(name);
      }
    } finally {
      await c.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK.toString()]).catch(() => {});
    }
  } finally {
    c.release();
  }
  return applied;
}
