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

/**
 * The host registry (hosts, placements) of a server. On SQLite it shares the store's connection.
 * On PostgreSQL there is no PostgreSQL host store yet: the registry is kept in SQLite in
 * `dataDir/fleet-hosts.db`, so each control plane sees only the hosts that joined it
 * (docs/fleet.md says so); closing the returned `close` releases that file.
 */
export function openHostStore(
  store: Store,
  dataDir: string,
): { hosts: ReturnType<SqliteStore["hostStore"]>; urls: ReturnType<SqliteStore["hostUrls"]>; close: () => Promise<void> } {
  if (store instanceof SqliteStore) return { hosts: store.hostStore(), urls: store.hostUrls(), close: async () => {} };
  const own = new SqliteStore(path.join(dataDir, "fleet-hosts.db"));
  return { hosts: own.hostStore(), urls: own.hostUrls(), close: () => own.close() };
}
