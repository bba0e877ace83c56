import type Database from "better-sqlite3";
import type { KeyFingerprints } from "./key-fingerprints.js";

/** The key fingerprints on SQLite (see key-fingerprints.ts). */
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
