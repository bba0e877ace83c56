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

/** The tables both backends keep beside the Store interface, each on the backend's own connection. */
interface StoreTables {
  hostStore(): HostStore;
  hostUrls(): HostUrls;
  imageAliases(): ImageAliasStore;
  keyFingerprints(): KeyFingerprints;
  volumeSyncs(): VolumeSyncStore;
  volumes(): VolumeStore;
}

/** An opener of table `name` in a server's own store; `lacks` says what any other Store lacks. */
function tableOpener<K extends keyof StoreTables>(name: K, lacks: string): (store: Store) => ReturnType<StoreTables[K]> {
  return (store) => {
    if (!(store instanceof SqliteStore || store instanceof PgStore)) throw new Error(`this store ${lacks}`);
    const tables: StoreTables = store;
    return tables[name]() as ReturnType<StoreTables[K]>;
  };
}

/** The host registry (hosts, placements) in the server's own store: SQLite's connection or PostgreSQL's pool. */
export const openHostStore = tableOpener("hostStore", "has no host registry");
/** The fingerprints of the keys every server on the store's database must share. */
export const openKeyFingerprints = tableOpener("keyFingerprints", "keeps no key fingerprints");
/** Where workers are reached (table `host_urls`), in the server's own store. */
export const openHostUrls = tableOpener("hostUrls", "has no host registry");
/** The admin-set image aliases, in the server's own store (every server on its database shares them). */
export const openImageAliases = tableOpener("imageAliases", "keeps no image aliases");
/** Volumes' copies in the object store and their lost homes (fleet), in the server's own store. */
export const openVolumeSyncs = tableOpener("volumeSyncs", "keeps no volumes");
/** Volumes and their mounts, in the server's own store. */
export const openVolumeStore = tableOpener("volumes", "keeps no volumes");
