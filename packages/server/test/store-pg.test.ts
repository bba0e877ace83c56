// The store conformance suite (test/store/conformance.ts) against the PostgreSQL store, on a real
// PostgreSQL server this file starts itself (postgres-server.ts: Debian's postgresql-15, a throwaway
// cluster in a temporary directory, stopped by PID at the end). Each test gets its own schema;
// "peers" are further PgStores on it, each with its own pool (several servers on one database).
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PgStore } from "../src/index.js";
import { type PgServer, startPostgres } from "./postgres-server.js";
import { describeStoreConformance } from "./store/conformance.js";

let server: PgServer;
let n = 0;

const DB = "conformance";

beforeAll(async () => {
  server = await startPostgres();
  await server.createDatabase(DB);
});
afterAll(async () => {
  await server?.stop();
});

describeStoreConformance("PostgreSQL", async (opts = {}) => {
  // Each test its own empty schema (search_path in the URL): as isolated as a database, and cheap.
  const name = `t${n++}`;
  const url = await server.createSchema(DB, name);
  const opened = await Promise.all(Array.from({ length: 1 + (opts.peers ?? 0) }, () => PgStore.open(url, { poolSize: 4 })));
  let store = opened[0] as PgStore;
  const peers = opened.slice(1);
  return {
    store,
    peers,
    async migrations() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        return (await c.query<{ name: string }>("SELECT name FROM schema_migrations ORDER BY name")).rows.map((r) => r.name);
      } finally {
        await c.end();
      }
    },
    async reopen() {
      await store.close();
      store = await PgStore.open(url, { poolSize: 4 });
      return store;
    },
    async destroy() {
      await Promise.all([store, ...peers].map((s) => s.close()));
      await server.dropSchema(DB, name);
    },
  };
});

it("refuses a database it cannot open, naming it without its password", async () => {
  const url = server.url("no_such_database").replace("postgres@", "postgres:hunter2@");
  const err = await PgStore.open(url).then(
    () => undefined,
    (e: Error) => e,
  );
  expect(err?.message).toMatch(
    /could not open the PostgreSQL database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/no_such_database: .*does not exist/,
  );
  expect(err?.message).not.toContain("hunter2");
});
