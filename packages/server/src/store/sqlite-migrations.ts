import type Database from "better-sqlite3";
import { IMAGE_ALIASES_MIGRATION } from "./image-aliases.js";
import { JOB_TAILS_MIGRATION } from "./job-tails.js";
import { KEY_FINGERPRINTS_MIGRATION } from "./key-fingerprints.js";
import * as ck from "./sqlite-checkpoints.js";
import { HOST_URLS_MIGRATION } from "./sqlite-host-urls.js";
import * as hosts from "./sqlite-hosts.js";
import * as meter from "./sqlite-metering.js";
import * as netw from "./sqlite-network.js";
import * as ports from "./sqlite-ports.js";
import * as tenancy from "./sqlite-tenancy.js";
import { SQLITE_METER_HOURS_CLUSTERED_MIGRATION, SQLITE_METER_HOURS_MIGRATION } from "./usage-hours.js";
import { METER_OPEN_MIGRATION } from "./usage-open.js";
import { METER_WINDOW_MIGRATION } from "./usage-sums.js";
import { VOLUME_HOMES_MIGRATION, VOLUME_SYNCS_MIGRATION, VOLUMES_MIGRATION } from "./volume-rows.js";

/**
 * Schema migrations, applied once each by name (recorded in `schema_migrations`), so features
 * developed side by side can each add their own without fighting over a version number.
 * Never edit an applied migration: add a new one.
 */
export const SQLITE_MIGRATIONS: Array<[name: string, sql: string]> = [
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
  ["0002-teams-secrets-quotas", tenancy.TENANCY_MIGRATION],
  [
    "0003-timeouts-jobs",
    `ALTER TABLE sandboxes ADD COLUMN timeout_minutes REAL;
   ALTER TABLE sandboxes ADD COLUMN idle_timeout_minutes REAL;
   ALTER TABLE sandboxes ADD COLUMN expires_at TEXT;
   ALTER TABLE sandboxes ADD COLUMN last_activity_at TEXT;
   CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
     team_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, command TEXT NOT NULL, status TEXT NOT NULL,
     exit_code INTEGER, stdout_bytes INTEGER NOT NULL DEFAULT 0, stderr_bytes INTEGER NOT NULL DEFAULT 0,
     wrapper_pid INTEGER, kill_requested INTEGER NOT NULL DEFAULT 0, error_reason TEXT,
     started_at TEXT NOT NULL, ended_at TEXT);
   CREATE INDEX jobs_sandbox ON jobs(sandbox_id, seq);`,
  ],
  ["0004-checkpoints", ck.CHECKPOINT_MIGRATION],
  ["0005-start-path", "ALTER TABLE sandboxes ADD COLUMN start_path TEXT;"],
  ["0006-memory-checkpoints", ck.CHECKPOINT_MEMORY_MIGRATION],
  ["0007-exposed-ports", ports.EXPOSED_PORTS_MIGRATION],
  ["0008-sandbox-networks", netw.NETWORK_MIGRATION],
  ["0009-metering", meter.METERING_MIGRATION],
  ["0010-fleet-hosts", hosts.HOSTS_MIGRATION],
  ["0011-host-urls", HOST_URLS_MIGRATION],
  ["0012-key-fingerprints", KEY_FINGERPRINTS_MIGRATION],
  ["0013-placed-by", hosts.PLACED_BY_MIGRATION],
  ["0014-image-aliases", IMAGE_ALIASES_MIGRATION],
  ["0015-display", "ALTER TABLE sandboxes ADD COLUMN display TEXT;"],
  [
    "0016-nested-virtualization",
    "ALTER TABLE sandboxes ADD COLUMN nested_virtualization INTEGER NOT NULL DEFAULT 0; ALTER TABLE checkpoints ADD COLUMN machine TEXT;",
  ],
  ["0017-volumes", VOLUMES_MIGRATION],
  ["0018-meter-window", METER_WINDOW_MIGRATION],
  ["0019-meter-hours", SQLITE_METER_HOURS_MIGRATION],
  ["0020-volume-homes", VOLUME_HOMES_MIGRATION],
  ["0021-volume-syncs", VOLUME_SYNCS_MIGRATION],
  ["0022-meter-open", METER_OPEN_MIGRATION],
  ["0023-meter-hours-clustered", SQLITE_METER_HOURS_CLUSTERED_MIGRATION],
  ["0024-job-tails", JOB_TAILS_MIGRATION],
  ["0025-error-code", "ALTER TABLE sandboxes ADD COLUMN error_code TEXT;"],
  ["0026-base-names", ck.CHECKPOINT_BASE_NAMES_MIGRATION],
];

/** Applies the migrations not yet recorded, each in its own transaction. */
export function migrate(db: Database.Database): void {
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
  const applied = new Set((db.prepare("SELECT name FROM schema_migrations").all() as Array<{ name: string }>).map((r) => r.name));
  for (const [name, sql] of SQLITE_MIGRATIONS) {
    if (applied.has(name)) continue;
    db.transaction(() => {
      db.exec(sql);
      db.prepare("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)").run(name, new Date().toISOString());
    })();
  }
}
