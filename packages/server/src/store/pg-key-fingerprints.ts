import type pg from "pg";
import type { KeyFingerprints } from "./key-fingerprints.js";
import { one, run } from "./pg-db.js";

/** The key fingerprints on PostgreSQL (see key-fingerprints.ts). */
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
