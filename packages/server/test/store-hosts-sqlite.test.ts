// The HostStore conformance suite (test/store/host-conformance.ts) against SQLite: the fleet's
// tables in the same database file and connection as SqliteStore. No VM: milliseconds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SqliteStore } from "../src/index.js";
import { describeHostStoreConformance, sandboxAdder } from "./store/host-conformance.js";

describeHostStoreConformance("SQLite", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-hosts-"));
  const store = new SqliteStore(path.join(dir, "sandtree.db"));
  return {
    hosts: store.hostStore(),
    addSandbox: sandboxAdder(store),
    store,
    async destroy() {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
