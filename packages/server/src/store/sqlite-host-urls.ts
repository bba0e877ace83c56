import type Database from "better-sqlite3";
import type { HostUrls } from "./host-urls.js";

/**
 * Where each worker is (see HostUrls). Its own table (not a column of `hosts`), written at
 * registration: a host without a row runs nothing (the host `local`, or a worker that registered
 * no URL). Its first migration named the URL a worker then served its own sandbox API at.
 */
export const HOST_URLS_MIGRATION = `
  CREATE TABLE host_urls (host_id TEXT PRIMARY KEY REFERENCES hosts(id), url TEXT NOT NULL);`;

/** A worker's machine host (registered by `sandtree worker`; workers from before it: null). */
export const HOST_URLS_MACHINE_HOST_MIGRATION = "ALTER TABLE host_urls ADD COLUMN host_url TEXT;";

export class SqliteHostUrls implements HostUrls {
  constructor(private readonly db: Database.Database) {}

  async set(hostId: string, url: string | null, hostUrl: string | null = null): Promise<void> {
    if (url === null) this.db.prepare("DELETE FROM host_urls WHERE host_id = ?").run(hostId);
    else
      this.db
        .prepare(
          "INSERT INTO host_urls (host_id, url, host_url) VALUES (?, ?, ?) " +
            "ON CONFLICT (host_id) DO UPDATE SET url = excluded.url, host_url = excluded.host_url",
        )
        .run(hostId, url, hostUrl);
  }

  async get(hostId: string): Promise<string | null> {
    const row = this.db.prepare("SELECT url FROM host_urls WHERE host_id = ?").get(hostId) as { url: string } | undefined;
    return row?.url ?? null;
  }

  async all(): Promise<Map<string, string>> {
    const rows = this.db.prepare("SELECT host_id, url FROM host_urls").all() as Array<{ host_id: string; url: string }>;
    return new Map(rows.map((r) => [r.host_id, r.url]));
  }

  async hostUrls(): Promise<Map<string, string>> {
    const rows = this.db.prepare("SELECT host_id, host_url FROM host_urls WHERE host_url IS NOT NULL").all() as Array<{
      host_id: string;
      host_url: string;
    }>;
    return new Map(rows.map((r) => [r.host_id, r.host_url]));
  }
}
