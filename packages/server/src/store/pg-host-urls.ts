import type pg from "pg";
import type { HostUrls } from "./host-urls.js";
import { all, one, run } from "./pg-db.js";

/** Where each worker is (PostgreSQL; see sqlite-host-urls.ts). */
export const PG_HOST_URLS_MIGRATION = `
  CREATE TABLE host_urls (host_id TEXT PRIMARY KEY REFERENCES hosts(id), url TEXT NOT NULL);`;

/** A worker's machine host beside its API (see sqlite-host-urls.ts). */
export const PG_HOST_URLS_MACHINE_HOST_MIGRATION = "ALTER TABLE host_urls ADD COLUMN host_url TEXT;";

export class PgHostUrls implements HostUrls {
  constructor(private readonly pool: pg.Pool) {}

  async set(hostId: string, url: string | null, hostUrl: string | null = null): Promise<void> {
    if (url === null) await run(this.pool, "DELETE FROM host_urls WHERE host_id = $1", [hostId]);
    else
      await run(
        this.pool,
        "INSERT INTO host_urls (host_id, url, host_url) VALUES ($1, $2, $3) " +
          "ON CONFLICT (host_id) DO UPDATE SET url = EXCLUDED.url, host_url = EXCLUDED.host_url",
        [hostId, url, hostUrl],
      );
  }

  async get(hostId: string): Promise<string | null> {
    return (await one<{ url: string }>(this.pool, "SELECT url FROM host_urls WHERE host_id = $1", [hostId]))?.url ?? null;
  }

  async all(): Promise<Map<string, string>> {
    const rows = await all<{ host_id: string; url: string }>(this.pool, "SELECT host_id, url FROM host_urls", []);
    return new Map(rows.map((r) => [r.host_id, r.url]));
  }

  async hostUrls(): Promise<Map<string, string>> {
    const rows = await all<{ host_id: string; host_url: string }>(
      this.pool,
      "SELECT host_id, host_url FROM host_urls WHERE host_url IS NOT NULL",
      [],
    );
    return new Map(rows.map((r) => [r.host_id, r.host_url]));
  }
}
