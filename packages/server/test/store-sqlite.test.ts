// The store conformance suite (test/store/conformance.ts) against the SQLite store, each test
// on a fresh database file in a temporary directory. No VM: these tests take milliseconds.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { SqliteStore } from "../src/index.js";
import { describeStoreConformance } from "./store/conformance.js";

describeStoreConformance("SQLite", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-store-"));
  const file = path.join(dir, "sandtree.db");
  let store = new SqliteStore(file);
  return {
    store,
    async reopen() {
      store.close();
      store = new SqliteStore(file);
      return store;
    },
    async destroy() {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

it("keeps the SQLite files behind the seam: only they, server.ts and index.ts import them", () => {
  const packages = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const allowed = /^server\/src\/(store\/sqlite-[a-z-]+|server|index)\.ts$/;
  const offenders: string[] = [];
  for (const pkg of readdirSync(packages)) {
    for (const sub of ["src", "test"]) {
      const root = path.join(packages, pkg, sub);
      let files: string[];
      try {
        files = readdirSync(root, { recursive: true, encoding: "utf8" });
      } catch {
        continue;
      }
      for (const f of files) {
        const rel = path.posix.join(pkg, sub, f.split(path.sep).join("/"));
        if (!/\.tsx?$/.test(f) || allowed.test(rel)) continue;
        if (/from\s+"[^"]*\/sqlite-[a-z-]+\.js"/.test(readFileSync(path.join(root, f), "utf8"))) offenders.push(rel);
      }
    }
  }
  expect(offenders).toEqual([]);
});
