import path from "node:path";
import type { HostStore } from "./host-store.js";
import type { HostUrls } from "./host-urls.js";
import type { ImageAliasStore } from "./image-aliases.js";
import type { KeyFingerprints } from "./key-fingerprints.js";
import { PgStore } from "./pg-store.js";
import { SqliteStore } from "./sqlite-store.js";
import type { Store } from "./store.js";
import type { VolumeStore } from "./volume-rows.js";
import type { VolumeSyncStore } from "./volume-sync-rows.js";

/**
 * The store a server's settings name: PostgreSQL when `database` is a postgres:// URL (several
 * servers may share it; its migrations run once, under a lock), otherwise SQLite in
 * `dataDir/sandtree.db` (one server). The data dir must exist.
 */
export async function openStore(cfg: { database?: string | undefined; dataDir: string }): Promise<Store> {
  if (cfg.database !== undefined) return PgStore.open(cfg.database);
  return new SqliteStore(path.join(cfg.dataDir, "sandtree.db"));
}

/** The host registry (hosts, placements) in the server's own store: SQLite's connection or PostgreSQL's pool. */
export function openHostStore(store: Store): HostStore {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.hostStore();
  throw new Error("this store has no host registry");
}

/** The fingerprints of the keys every server on the store's database must share. */
export function openKeyFingerprints(store: Store): KeyFingerprints {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.keyFingerprints();
  throw new Error("this store keeps no key fingerprints");
}

/** Where workers are reached (table `host_urls`), in the server's own store. */
export function openHostUrls(store: Store): HostUrls {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.hostUrls();
  throw new Error("this store has no host registry");
}

/** The admin-set image aliases, in the server's own store (every server on its database shares them). */
export function openImageAliases(store: Store): ImageAliasStore {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.imageAliases();
  throw new Error("this store keeps no image aliases");
}

/** Volumes' copies in the object store and their lost homes (fleet), in the server's own store. */
export function openVolumeSyncs(store: Store): VolumeSyncStore {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.volumeSyncs();
  throw new Error("this store keeps no volumes");
}

/** Volumes and their mounts, in the server's own store. */
export function openVolumeStore(store: Store): VolumeStore {
  if (store instanceof SqliteStore || store instanceof PgStore) return store.volumes();
  throw new Error("this store keeps no volumes");
}
