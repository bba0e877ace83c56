// The store conformance suite (test/store/conformance.ts) against the PostgreSQL store, on a real
// PostgreSQL server this file starts itself (postgres-server.ts: Debian's postgresql-15, a throwaway
// cluster in a temporary directory, stopped by PID at the end). Each test gets its own schema;
// "peers" are further PgStores on it, each with its own pool (several servers on one database).
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PgStore } from "../src/index.js";
import { type PgServer, startPostgres } from "./postgres-server.js";
import { baseNamesCase, legacyCheckpoint, UNDO_BASE_NAMES } from "./store/base-names-case.js";
import { describeStoreConformance } from "./store/conformance.js";
import { describeHostStoreConformance, sandboxAdder } from "./store/host-conformance.js";

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

describeHostStoreConformance("PostgreSQL", async () => {
  const name = `h${n++}`;
  const url = await server.createSchema(DB, name);
  const store = await PgStore.open(url, { poolSize: 4 });
  return {
    hosts: store.hostStore(),
    addSandbox: sandboxAdder(store),
    store,
    async destroy() {
      await store.close();
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

it("two control planes' host stores on one database never overcommit a host, and one of them reports a LOST host", async () => {
  const name = `h${n++}`;
  const url = await server.createSchema(DB, name);
  const [a, b] = await Promise.all([PgStore.open(url, { poolSize: 4 }), PgStore.open(url, { poolSize: 4 })]);
  try {
    const stores = [a.hostStore(), b.hostStore()];
    const T0 = "2026-01-01T00:00:00.000Z";
    await stores[0]?.registerHost({
      id: "host_w",
      name: "w",
      capacity: { vcpus: 6, memory_mib: 100_000, disk_gib: 1000, accel: "tcg" },
      locality: { images: [], templates: [], layers: [] },
      secret_hash: "h",
      at: T0,
    });
    const placed = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        stores[i % 2]?.place(
          { sandbox_id: `sb${i % 10}`, host_id: "host_w", vcpus: 1, memory_mib: 1, disk_gib: 1, placed_at: T0 },
          { freshSince: T0 },
        ),
      ),
    );
    // 10 distinct sandboxes, each sent to both stores, on a host of 6 vCPUs: 6 placed once each.
    expect(placed.filter(Boolean)).toHaveLength(6);
    expect((await stores[1]?.getHost("host_w"))?.usage).toMatchObject({ vcpus: 6, placements: 6 });
    expect(await stores[0]?.countPlacements()).toBe(6);
    const lost = await Promise.all(stores.map((s) => s?.markLost("2026-01-01T00:01:00.000Z")));
    expect(lost.flat().map((l) => [l?.host.name, l?.sandboxIds.length])).toEqual([["w", 6]]);
  } finally {
    await Promise.all([a.close(), b.close()]);
    await server.dropSchema(DB, name);
  }
});

baseNamesCase(async (basePaths) => {
  const name = `b${n++}`;
  const url = await server.createSchema(DB, name);
  await (await PgStore.open(url, { poolSize: 1 })).close();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const sql of UNDO_BASE_NAMES) await c.query(sql);
    for (const [i, p] of basePaths.entries()) {
      const row = legacyCheckpoint(i, p);
      const cols = Object.keys(row);
      await c.query(
        `INSERT INTO checkpoints (${cols.join(", ")}) VALUES (${cols.map((_, j) => `$${j + 1}`).join(", ")})`,
        Object.values(row),
      );
    }
  } finally {
    await c.end();
  }
  const store = await PgStore.open(url, { poolSize: 4 });
  return {
    store,
    close: async () => {
      await store.close();
      await server.dropSchema(DB, name);
    },
  };
});
