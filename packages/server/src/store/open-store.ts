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
  return backendOf(store, "has no host registry").hostStore();
}

/** The fingerprints of the keys every server on the store's database must share. */
export function openKeyFingerprints(store: Store): KeyFingerprints {
  return backendOf(store, "keeps no key fingerprints").keyFingerprints();
}

/** Where workers are reached (table `host_urls`), in the server's own store. */
export function openHostUrls(store: Store): HostUrls {
  return backendOf(store, "has no host registry").hostUrls();
}

/** The admin-set image aliases, in the server's own store (every server on its database shares them). */
export function openImageAliases(store: Store): ImageAliasStore {
  return backendOf(store, "keeps no image aliases").imageAliases();
}

/** Volumes' copies in the object store and their lost homes (fleet), in the server's own store. */
export function openVolumeSyncs(store: Store): VolumeSyncStore {
  return backendOf(store, "keeps no volumes").volumeSyncs();
}

/** Volumes and their mounts, in the server's own store. */
export function openVolumeStore(store: Store): VolumeStore {
  return backendOf(store, "keeps no volumes").volumes();
}

/** The store as the backend it is, for the tables it keeps beside the Store interface; `lacks` says what an other store lacks. */
function backendOf(store: Store, lacks: string): SqliteStore | PgStore {
  if (store instanceof SqliteStore || store instanceof PgStore) return store;
  throw new Error(`this store ${lacks}`);
}
