import type Database from "better-sqlite3";
import type pg from "pg";
import { one, run } from "./pg-db.js";

/**
 * Fingerprints of the keys every server on one database must share (table `key_fingerprints`):
 * the first server to start records each; later ones compare theirs. Only HMACs of a constant
 * are stored, never the keys.
 */
export interface KeyFingerprints {
  /** Records `fingerprint` under `name` unless one is recorded; answers the recorded one. */
  claim(name: string, fingerprint: string): Promise<string>;
}

export const KEY_FINGERPRINTS_MIGRATION = `
  CREATE TABLE key_fingerprints (name TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, recorded_at TEXT NOT NULL);`;

export class SqliteKeyFingerprints implements KeyFingerprints {
  constructor(private readonly db: Database.Database) {}

  async claim(name: string, fingerprint: string): Promise<string> {
    this.db
      .prepare("INSERT INTO key_fingerprints (name, fingerprint, recorded_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING")
      .run(name, fingerprint, new Date().toISOString());
    const row = this.db.prepare("SELECT fingerprint FROM key_fingerprints WHERE name = ?").get(name) as
      | { fingerprint: string }
      | undefined;
    return row?.fingerprint ?? fingerprint;
  }
}

export class PgKeyFingerprints implements KeyFingerprints {
  constructor(private readonly pool: pg.Pool) {}

  async claim(name: string, fingerprint: string): Promise<string> {
    await run(
      this.pool,
      "INSERT INTO key_fingerprints (name, fingerprint, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
      [name, fingerprint, new Date().toISOString()],
    );
    const row = await one<{ fingerprint: string }>(this.pool, "SELECT fingerprint FROM key_fingerprints WHERE name = $1", [name]);
    return row?.fingerprint ?? fingerprint;
  }
}
