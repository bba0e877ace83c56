import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";

describe("config", () => {
  it("takes the explicit option over the environment over the default", () => {
    expect(loadConfig({}, {}).port).toBe(7070);
    expect(loadConfig({}, { SANDTREE_PORT: "7171" }).port).toBe(7171);
    expect(loadConfig({ port: 7272 }, { SANDTREE_PORT: "7171" }).port).toBe(7272);
    // An empty variable is not set.
    expect(loadConfig({}, { SANDTREE_PORT: "" }).port).toBe(7070);
  });

  it("covers deadlines, flatten depth, warm templates, log level, registries and dirs", () => {
    const cfg = loadConfig(
      { deadlines: { qmpMs: 2000 } },
      {
        SANDTREE_QMP_DEADLINE_MS: "9000",
        SANDTREE_AGENT_DEADLINE_MS: "0",
        SANDTREE_FLATTEN_DEPTH: "3",
        SANDTREE_WARM_TEMPLATES: "0",
        SANDTREE_LOG_LEVEL: "warn",
        SANDTREE_INSECURE_REGISTRIES: "a:5000, b:5000",
        SANDTREE_DEFAULT_REGISTRY: "registry.example:5000",
        SANDTREE_DATA_DIR: "/var/lib/st",
        SANDTREE_CACHE_DIR: "/var/cache/st",
        SANDTREE_DNS_UPSTREAM: "192.0.2.1:53,192.0.2.2",
      },
    );
    expect(cfg.deadlines).toEqual({ adoptMs: 10_000, qmpMs: 2000, agentMs: 0, freezeMs: 30_000 });
    expect(cfg).toMatchObject({
      flattenDepth: 3,
      warmTemplates: false,
      logLevel: "warn",
      insecureRegistries: ["a:5000", "b:5000"],
      defaultRegistry: "registry.example:5000",
      dataDir: "/var/lib/st",
      cacheDir: "/var/cache/st",
      dnsUpstreams: ["192.0.2.1:53", "192.0.2.2"],
    });
    expect(loadConfig({}, {}).warmTemplates).toBe(true);
    // Short image names resolve on Docker Hub by default, as Docker resolves them; `none` keeps them local.
    expect(loadConfig({}, {}).defaultRegistry).toBe("docker.io");
    expect(loadConfig({}, { SANDTREE_DEFAULT_REGISTRY: "none" }).defaultRegistry).toBeNull();
  });

  it("refuses a bad value naming the setting and its variable", () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ SANDTREE_PORT: "70000" }, /port or SANDTREE_PORT/],
      [{ SANDTREE_QMP_DEADLINE_MS: "ten" }, /deadlines\.qmpMs or SANDTREE_QMP_DEADLINE_MS/],
      [{ SANDTREE_FLATTEN_DEPTH: "1" }, /flattenDepth or SANDTREE_FLATTEN_DEPTH/],
      [{ SANDTREE_LOG_LEVEL: "loud" }, /logLevel or SANDTREE_LOG_LEVEL/],
      [{ SANDTREE_WARM_TEMPLATES: "maybe" }, /warmTemplates or SANDTREE_WARM_TEMPLATES/],
      [{ SANDTREE_NETWORK: "sometimes" }, /network or SANDTREE_NETWORK/],
    ];
    for (const [env, message] of cases) {
      expect(() => loadConfig({}, env)).toThrow(message);
    }
    expect(() => loadConfig({ metricsToken: "short" }, {})).toThrow(/metricsToken.*at least 16/);
  });

  it("takes a PostgreSQL URL as the database, SQLite in the data dir when none is given", () => {
    expect(loadConfig({}, {}).database).toBeUndefined();
    const url = "postgres://sandtree:secret@db.internal:5432/sandtree";
    expect(loadConfig({}, { SANDTREE_DATABASE_URL: url }).database).toBe(url);
    expect(loadConfig({ database: "postgresql://db/st" }, { SANDTREE_DATABASE_URL: url }).database).toBe("postgresql://db/st");
    // A unix socket directory as the host.
    expect(loadConfig({ database: "postgres:///st?host=/run/postgresql" }, {}).database).toBe(
      "postgres:///st?host=/run/postgresql",
    );
    for (const bad of ["mysql://db/st", "sqlite:///tmp/x.db", "db.internal:5432", "postgres:///st"]) {
      expect(() => loadConfig({}, { SANDTREE_DATABASE_URL: bad })).toThrow(/database or SANDTREE_DATABASE_URL.*postgres:\/\//);
    }
  });
});
