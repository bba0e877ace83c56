// The store conformance suite (test/store/conformance.ts) against the SQLite store, each test
// on a fresh database file in a temporary directory; "peers" are further connections to the same
// file (several processes on one SQLite database). No VM: these tests take milliseconds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { SqliteStore } from "../src/index.js";
import { baseNamesCase, legacyCheckpoint, UNDO_BASE_NAMES } from "./store/base-names-case.js";
import { describeStoreConformance } from "./store/conformance.js";

describeStoreConformance("SQLite", async (opts = {}) => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-store-"));
  const file = path.join(dir, "sandtree.db");
  let store = new SqliteStore(file);
  const peers = Array.from({ length: opts.peers ?? 0 }, () => new SqliteStore(file));
  return {
    store,
    peers,
    async migrations() {
      const db = new Database(file, { readonly: true });
      try {
        return (db.prepare("SELECT name FROM schema_migrations ORDER BY name").all() as Array<{ name: string }>).map(
          (r) => r.name,
        );
      } finally {
        db.close();
      }
    },
    async reopen() {
      await store.close();
      store = new SqliteStore(file);
      return store;
    },
    async destroy() {
      await store.close();
      for (const p of peers) await p.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

baseNamesCase(async (basePaths) => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-store-"));
  const file = path.join(dir, "sandtree.db");
  await new SqliteStore(file).close();
  const db = new Database(file);
  for (const sql of UNDO_BASE_NAMES) db.exec(sql);
  basePaths.forEach((p, i) => {
    const row = legacyCheckpoint(i, p);
    const cols = Object.keys(row);
    db.prepare(`INSERT INTO checkpoints (${cols.join(", ")}) VALUES (${cols.map((c) => `@${c}`).join(", ")})`).run(row);
  });
  db.close();
  const store = new SqliteStore(file);
  return {
    store,
    close: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
