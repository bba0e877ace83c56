// Placement through the host cache on a real SQLite store: a refusal is never decided on the
// cached view alone. The view is up to a second old; a host that looked full (a sandbox just
// ended) is read again from the store before the placement is refused: the pinned host alone
// when the create names one, all hosts otherwise.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
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

  it("reads only the pinned host again before deciding, all the hosts when none is pinned", async () => {
    const reads = { listHosts: 0, getHostByName: 0 };
    // The store a deployment swaps, counting the reads placement makes of it.
    const counted = new Proxy(hosts, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if ((prop === "listHosts" || prop === "getHostByName") && typeof v === "function") {
          return (...args: unknown[]) => {
            reads[prop]++;
            return v.apply(target, args);
          };
        }
        return v;
      },
    });
    // The view never ages here (Date is still): only a refusal reads the store again.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const cache = new HostCache(counted);
      const args = { hosts: counted, cache, nowMs: NOW, freshMs: 30_000 };
      await cache.view();
      expect(reads).toEqual({ listHosts: 1, getHostByName: 0 });
      // sb-c holds both vCPUs in the view; the store has them free again.
      expect(await hosts.release("sb-c")).toBe(true);
      expect((await placeRanked(args, ask("sb-f", "small"))).host).toBe("small");
      expect(reads).toEqual({ listHosts: 1, getHostByName: 1 });
      await expect(placeRanked(args, ask("sb-g", "small"))).rejects.toMatchObject({
        code: "NO_CAPACITY",
        details: { host: "small" },
      });
      expect(reads).toEqual({ listHosts: 1, getHostByName: 2 });
      await expect(placeRanked(args, ask("sb-h"))).rejects.toMatchObject({ code: "NO_CAPACITY" });
      expect(reads).toEqual({ listHosts: 2, getHostByName: 2 });
    } finally {
      vi.useRealTimers();
    }
  });
});
