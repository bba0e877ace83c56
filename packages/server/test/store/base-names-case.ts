// The checkpoint base migration on a store's data (store-sqlite.test.ts, store-pg.test.ts): rows
// written before bases were named (a path on the host that took them) read back with the base's name.
import { expect, it } from "vitest";
import type { Store } from "../../src/store/store.js";

const HEX = "c0ffee".repeat(10).concat("c0ff");

/**
 * `legacy` makes data as it was before the "base-names" migration (the store's data with that
 * migration taken back: its column `base_path` again, its name no longer recorded), with one
 * checkpoint row per `base_path` given (legacyCheckpoint), then opens a store on it (applying it).
 */
export function baseNamesCase(legacy: (basePaths: string[]) => Promise<{ store: Store; close(): Promise<void> }>): void {
  it("migrates a checkpoint's recorded base path in an image store to the base's name, and keeps any other", async () => {
    const { store, close } = await legacy([
      `/home/u/.cache/sandtree/images/blobs/sha256/${HEX}/base.qcow2`,
      "/elsewhere/base.img",
    ]);
    try {
      expect((await store.getCheckpoint("old-0"))?.base).toBe(`sha256:${HEX}`);
      // Not an image store's path: kept as it was (ensureBase resolves the image again; no host gets it).
      expect((await store.getCheckpoint("old-1"))?.base).toBe("/elsewhere/base.img");
    } finally {
      await close();
    }
  });
}

/** Undoes the "base-names" migration on a store's data (the SQL is the same on both databases). */
export const UNDO_BASE_NAMES = [
  "ALTER TABLE checkpoints RENAME COLUMN base TO base_path",
  "DELETE FROM schema_migrations WHERE name LIKE '%-base-names'",
];

/** A checkpoint row's columns as they were before "base-names", for raw SQL. */
export function legacyCheckpoint(i: number, basePath: string): Record<string, string | number> {
  const at = "2026-01-01T00:00:00.000Z";
  return {
    id: `old-${i}`,
    team_id: "team-old",
    sandbox_id: "sbx-old",
    state: "DURABLE",
    depth: 1,
    image: "sandtree/busybox",
    base_path: basePath,
    disk_size_bytes: 1024,
    created_at: at,
    updated_at: at,
  };
}
