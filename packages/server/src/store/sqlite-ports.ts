import type Database from "better-sqlite3";
import type { ExposedPortRow } from "./rows.js";

// The SQL behind SqliteStore's exposed-port methods.

export const EXPOSED_PORTS_MIGRATION = `
  CREATE TABLE exposed_ports (sandbox_id TEXT NOT NULL, port INTEGER NOT NULL, token_sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (sandbox_id, port));`;

/** Inserts the port, or gives an already exposed one a new token (keeping its created_at). */
export function upsertExposedPort(db: Database.Database, row: ExposedPortRow): ExposedPortRow {
  db.prepare(
    `INSERT INTO exposed_ports (sandbox_id, port, token_sha256, created_at) VALUES (@sandbox_id, @port, @token_sha256, @created_at)
     ON CONFLICT (sandbox_id, port) DO UPDATE SET token_sha256 = excluded.token_sha256`,
  ).run(row);
  return getExposedPort(db, row.sandbox_id, row.port) ?? row;
}

export function getExposedPort(db: Database.Database, sandboxId: string, port: number): ExposedPortRow | undefined {
  return db.prepare("SELECT * FROM exposed_ports WHERE sandbox_id = ? AND port = ?").get(sandboxId, port) as
    | ExposedPortRow
    | undefined;
}

export function listExposedPorts(db: Database.Database, sandboxId: string): ExposedPortRow[] {
  return db.prepare("SELECT * FROM exposed_ports WHERE sandbox_id = ? ORDER BY port").all(sandboxId) as ExposedPortRow[];
}

export function deleteExposedPort(db: Database.Database, sandboxId: string, port: number): boolean {
  return db.prepare("DELETE FROM exposed_ports WHERE sandbox_id = ? AND port = ?").run(sandboxId, port).changes > 0;
}

export function deleteExposedPorts(db: Database.Database, sandboxId: string): number {
  return db.prepare("DELETE FROM exposed_ports WHERE sandbox_id = ?").run(sandboxId).changes;
}
