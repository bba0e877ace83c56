// The store conformance suite (test/store/conformance.ts) against the SQLite store, each test
// on a fresh database file in a temporary directory. No VM: these tests take milliseconds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SqliteStore } from "../src/index.js";
import { describeStoreConformance } from "./store/conformance.js";

describeStoreConformance("SQLite", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-store-"));
  const file = path.join(dir, "sandtree.db");
  let store = new SqliteStore(file);
  return {
    store,
    async reopen() {
      await store.close();
      store = new SqliteStore(file);
      return store;
    },
    async destroy() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
