// Placement through the host cache on a real SQLite store: a refusal is never decided on the
// cached view alone. The view is up to a second old; a host that looked full (a sandbox just
// ended) is read again from the store before the placement is refused.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/index.js";
import { HostCache } from "../../src/services/fleet/host-cache.js";
import { placeRanked } from "../../src/services/fleet/place-ranked.js";
import type { HostStore } from "../../src/store/host-store.js";

const NOW = Date.parse("2026-06-01T00:00:00Z");

describe("placeRanked over the host cache", () => {
  let dir: string;
  let store: SqliteStore;
  let hosts: HostStore;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sandtree-place-"));
    store = new SqliteStore(path.join(dir, "sandtree.db"));
    hosts = store.hostStore();
    await hosts.registerHost({
      id: "host_small",
      name: "small",
      capacity: { vcpus: 2, memory_mib: 4096, disk_gib: 20, accel: "tcg" },
      locality: { images: [], templates: [], layers: [] },
      secret_hash: "x",
      at: new Date(NOW).toISOString(),
    });
  });

  afterAll(() => {
    store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ask = (id: string, host?: string) => ({
    sandbox_id: id,
    vcpus: 2,
    memory_mib: 1024,
    disk_gib: 1,
    layers: [],
    ...(host ? { host } : {}),
  });

  it("places on a host the cached view still counts full once the store has released it", async () => {
    const cache = new HostCache(hosts);
    const args = { hosts, cache, nowMs: NOW, freshMs: 30_000 };
    expect((await placeRanked(args, ask("sb-a"))).host).toBe("small");
    // The cache now counts sb-a (and was read just now): the host is full in the view.
    expect((await cache.view()).get("host_small")?.usage.vcpus).toBe(2);
    expect(await hosts.release("sb-a")).toBe(true);
    // Pinned and unpinned alike: the store has the room, so the placement goes through.
    expect((await placeRanked(args, ask("sb-b", "small"))).host).toBe("small");
    expect(await hosts.release("sb-b")).toBe(true);
    expect((await placeRanked(args, ask("sb-c"))).host).toBe("small");
  });

  it("still refuses NO_CAPACITY when the store agrees the host is full", async () => {
    const cache = new HostCache(hosts);
    const args = { hosts, cache, nowMs: NOW, freshMs: 30_000 };
    // sb-c holds both vCPUs.
    await expect(placeRanked(args, ask("sb-d", "small"))).rejects.toMatchObject({ code: "NO_CAPACITY" });
    await expect(placeRanked(args, ask("sb-e"))).rejects.toMatchObject({ code: "NO_CAPACITY" });
    expect(await hosts.getPlacement("sb-d")).toBeUndefined();
  });
});
