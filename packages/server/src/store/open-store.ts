import path from "node:path";
import { PgStore } from "./pg-store.js";
import { SqliteStore } from "./sqlite-store.js";
import type { Store } from "./store.js";

/**
 * The store a server's settings name: PostgreSQL when `database` is a postgres:// URL (several
 * servers may share it; its migrations run once, under a lock), otherwise SQLite in
 * `dataDir/sandtree.db` (one server). The data dir must exist.
 */
export async function openStore(cfg: { database?: string | undefined; dataDir: string }): Promise<Store> {
  if (cfg.database !== undefined) return PgStore.open(cfg.database);
  return new SqliteStore(path.join(cfg.dataDir, "sandtree.db"));
}
