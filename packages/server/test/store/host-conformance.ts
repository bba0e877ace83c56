import type { SandboxStatus } from "@sandtree/protocol";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HostStore, NewHost, PlacementRow } from "../../src/store/host-store.js";
import { openHostUrls } from "../../src/store/open-store.js";
import type { Store } from "../../src/store/store.js";
import { addSandbox } from "./fixtures.js";

export interface OpenedHostStore {
  hosts: HostStore;
  /** Adds a sandbox row in the same database (through its Store: the fleet reads sandbox rows). */
  addSandbox(id: string, status: SandboxStatus): Promise<void>;
  /** The Store on the same database (its sandbox list filters by placement). */
  store: Store;
  destroy(): Promise<void>;
}

/** OpenedHostStore.addSandbox for a Store on the host store's database (its rows in one team). */
export function sandboxAdder(store: Store): OpenedHostStore["addSandbox"] {
  let team: Promise<string> | null = null;
  return async (id, status) => {
    team ??= store.createTeam("fleet").then((t) => t.id);
    await addSandbox(store, await team, { id, status });
  };
}

/**
 * Every HostStore implementation must pass this suite (SQLite and PostgreSQL). It uses
 * the interface only; each test gets a fresh, empty store.
 */
export function describeHostStoreConformance(name: string, open: () => Promise<OpenedHostStore>): void {
  describe(`HostStore conformance: ${name}`, () => {
    let opened: OpenedHostStore;
    let hosts: HostStore;
    beforeEach(async () => {
      opened = await open();
      hosts = opened.hosts;
    });
    afterEach(async () => {
      await opened.destroy();
    });

    const T0 = "2026-01-01T00:00:00.000Z";
    const T1 = "2026-01-01T00:00:10.000Z";
    const T2 = "2026-01-01T00:00:20.000Z";
    const newHost = (name: string, over: Partial<NewHost> = {}): NewHost => ({
      id: `host_${name}`,
      name,
      capacity: { vcpus: 4, memory_mib: 8192, disk_gib: 100, accel: "tcg" },
      locality: { images: ["sha256:aa"], templates: [], layers: [] },
      secret_hash: `hash-${name}`,
      at: T0,
      ...over,
    });
    const placement = (sandbox: string, hostId: string, over: Partial<PlacementRow> = {}): PlacementRow => ({
      sandbox_id: sandbox,
      host_id: hostId,
      vcpus: 2,
      memory_mib: 2048,
      disk_gib: 10,
      placed_at: T1,
      ...over,
    });

    it("the store lists a team's sandboxes placed on one host (hostId), newest first", async () => {
      await hosts.registerHost(newHost("w"));
      await hosts.registerHost(newHost("v"));
      for (const id of ["sb1", "sb2", "sb3", "sb4"]) await opened.addSandbox(id, "RUNNING");
      expect(await hosts.place(placement("sb1", "host_w"), { freshSince: T0 })).toBe(true);
      expect(await hosts.place(placement("sb2", "host_v"), { freshSince: T0 })).toBe(true);
      expect(await hosts.place(placement("sb3", "host_w"), { freshSince: T0 })).toBe(true);
      const team = (await opened.store.getTeamByName("fleet"))?.id ?? "";
      const on = async (hostId: string, limit = 10) =>
        (await opened.store.listSandboxes(team, { hostId, limit })).sandboxes.map((s) => s.id);
      expect(await on("host_w")).toEqual(["sb3", "sb1"]);
      expect(await on("host_v")).toEqual(["sb2"]);
      expect(await on("host_none")).toEqual([]);
      const first = await opened.store.listSandboxes(team, { hostId: "host_w", limit: 1 });
      expect(first.sandboxes.map((s) => s.id)).toEqual(["sb3"]);
      const rest = await opened.store.listSandboxes(team, { hostId: "host_w", limit: 1, beforeSeq: first.lastSeq ?? 0 });
      expect(rest.sandboxes.map((s) => s.id)).toEqual(["sb1"]);
      await hosts.release("sb1");
      expect(await on("host_w")).toEqual(["sb3"]);
    });

    it("keeps a worker's machine host URL beside its API URL, each written again at registration", async () => {
      const w = await hosts.registerHost(newHost("w"));
      const v = await hosts.registerHost(newHost("v"));
      const urls = openHostUrls(opened.store);
      await urls.set(w.id, "http://10.0.0.2:7071", "http://10.0.0.2:7072");
      await urls.set(v.id, "http://10.0.0.3:7071");
      expect(await urls.all()).toEqual(
        new Map([
          [w.id, "http://10.0.0.2:7071"],
          [v.id, "http://10.0.0.3:7071"],
        ]),
      );
      expect(await urls.hostUrls()).toEqual(new Map([[w.id, "http://10.0.0.2:7072"]]));
      await urls.set(v.id, "http://10.0.0.3:7071", "http://10.0.0.3:9000");
      await urls.set(w.id, null);
      expect(await urls.hostUrls()).toEqual(new Map([[v.id, "http://10.0.0.3:9000"]]));
      expect(await urls.get(w.id)).toBeNull();
    });

    it("registers, gets and lists hosts with capacity, locality and zero usage", async () => {
      const b = await hosts.registerHost(newHost("b"));
      await hosts.registerHost(newHost("a"));
      expect(b).toMatchObject({
        id: "host_b",
        name: "b",
        state: "ACTIVE",
        cordoned: false,
        capacity: { vcpus: 4, memory_mib: 8192, disk_gib: 100, accel: "tcg" },
        locality: { images: ["sha256:aa"], templates: [], layers: [] },
        usage: { vcpus: 0, memory_mib: 0, disk_gib: 0, placements: 0 },
        registered_at: T0,
        last_heartbeat_at: T0,
        secret_hash: "hash-b",
      });
      expect((await hosts.getHost("host_b"))?.name).toBe("b");
      expect((await hosts.getHostByName("a"))?.id).toBe("host_a");
      expect(await hosts.getHost("nope")).toBeUndefined();
      expect((await hosts.listHosts()).map((h) => h.name)).toEqual(["a", "b"]);
    });

    it("re-registering a name keeps its id, placements and cordon, and replaces its secret", async () => {
      await hosts.registerHost(newHost("w"));
      expect(await hosts.place(placement("sb1", "host_w"), { freshSince: T0 })).toBe(true);
      await hosts.setCordoned("host_w", true);
      const again = await hosts.registerHost(newHost("w", { id: "host_other", secret_hash: "hash-2", at: T1 }));
      expect(again).toMatchObject({ id: "host_w", state: "CORDONED", cordoned: true, secret_hash: "hash-2" });
      expect(again.usage.placements).toBe(1);
      expect(again.last_heartbeat_at).toBe(T1);
    });

    it("a heartbeat refreshes the time and replaces capacity and locality only when given", async () => {
      await hosts.registerHost(newHost("w"));
      const plain = await hosts.heartbeat("host_w", { at: T1 });
      expect(plain).toMatchObject({ last_heartbeat_at: T1, capacity: { vcpus: 4 }, locality: { images: ["sha256:aa"] } });
      const full = await hosts.heartbeat("host_w", {
        at: T2,
        capacity: { vcpus: 8, memory_mib: 1024, disk_gib: 5, accel: "kvm" },
        locality: { images: [], templates: ["t1"], layers: ["l1", "l2"] },
      });
      expect(full).toMatchObject({
        capacity: { vcpus: 8, memory_mib: 1024, disk_gib: 5, accel: "kvm" },
        locality: { images: [], templates: ["t1"], layers: ["l1", "l2"] },
      });
      expect(await hosts.heartbeat("nope", { at: T2 })).toBeUndefined();
    });

    it("places while capacity lasts, re-checking it in the store, and release gives it back", async () => {
      await hosts.registerHost(newHost("w"));
      expect(await hosts.place(placement("sb1", "host_w"), { freshSince: T0 })).toBe(true);
      expect(await hosts.place(placement("sb2", "host_w"), { freshSince: T0 })).toBe(true);
      // 4 vCPUs, two of 2 placed: the third does not fit.
      expect(await hosts.place(placement("sb3", "host_w"), { freshSince: T0 })).toBe(false);
      expect(await hosts.place(placement("sb3", "host_w", { vcpus: 0, memory_mib: 5000 }), { freshSince: T0 })).toBe(false);
      expect((await hosts.getHost("host_w"))?.usage).toEqual({ vcpus: 4, memory_mib: 4096, disk_gib: 20, placements: 2 });
      expect(await hosts.getPlacement("sb1")).toMatchObject({ host_id: "host_w", vcpus: 2, memory_mib: 2048, disk_gib: 10 });
      expect(await hosts.getPlacement("sb3")).toBeUndefined();
      expect(await hosts.release("sb1")).toBe(true);
      expect(await hosts.release("sb1")).toBe(false);
      expect((await hosts.getHost("host_w"))?.usage).toEqual({ vcpus: 2, memory_mib: 2048, disk_gib: 10, placements: 1 });
      expect(await hosts.place(placement("sb3", "host_w"), { freshSince: T0 })).toBe(true);
      expect((await hosts.listPlacements("host_w")).map((p) => p.sandbox_id).sort()).toEqual(["sb2", "sb3"]);
      expect(await hosts.countPlacements()).toBe(2);
    });

    it("reads one host by name with the usage its placements leave, as the list does (a pinned placement's re-read)", async () => {
      await hosts.registerHost(newHost("w"));
      await hosts.registerHost(newHost("v"));
      expect(await hosts.place(placement("sb1", "host_w"), { freshSince: T0 })).toBe(true);
      expect(await hosts.place(placement("sb2", "host_w", { vcpus: 1 }), { freshSince: T0 })).toBe(true);
      const listed = (await hosts.listHosts()).find((h) => h.name === "w");
      expect(await hosts.getHostByName("w")).toEqual(listed);
      expect((await hosts.getHostByName("w"))?.usage).toEqual({ vcpus: 3, memory_mib: 4096, disk_gib: 20, placements: 2 });
      expect(await hosts.release("sb1")).toBe(true);
      expect((await hosts.getHostByName("w"))?.usage).toEqual({ vcpus: 1, memory_mib: 2048, disk_gib: 10, placements: 1 });
      expect((await hosts.getHostByName("v"))?.usage).toEqual({ vcpus: 0, memory_mib: 0, disk_gib: 0, placements: 0 });
      expect(await hosts.getHostByName("nope")).toBeUndefined();
    });

    it("refuses a sandbox placed twice, a stale, cordoned or unknown host; force records whatever", async () => {
      await hosts.registerHost(newHost("w"));
      expect(await hosts.place(placement("sb1", "host_w"), { freshSince: T0 })).toBe(true);
      expect(await hosts.place(placement("sb1", "host_w", { vcpus: 1 }), { freshSince: T0 })).toBe(false);
      expect((await hosts.getHost("host_w"))?.usage.vcpus).toBe(2);
      expect(await hosts.place(placement("sb2", "host_w"), { freshSince: T1 })).toBe(false);
      expect(await hosts.place(placement("sb2", "nope"), { freshSince: T0 })).toBe(false);
      await hosts.setCordoned("host_w", true);
      expect(await hosts.place(placement("sb2", "host_w"), { freshSince: T0 })).toBe(false);
      expect(await hosts.place(placement("sb2", "host_w", { vcpus: 64 }), { freshSince: T2, force: true })).toBe(true);
      expect((await hosts.getHost("host_w"))?.usage).toMatchObject({ vcpus: 66, placements: 2 });
    });

    it("concurrent placements never overcommit a host", async () => {
      await hosts.registerHost(newHost("w", { capacity: { vcpus: 10, memory_mib: 100_000, disk_gib: 1000, accel: "tcg" } }));
      const tries = Array.from({ length: 25 }, (_, i) =>
        hosts.place(placement(`sb${i}`, "host_w", { vcpus: 1 }), { freshSince: T0 }),
      );
      const won = (await Promise.all(tries)).filter(Boolean).length;
      expect(won).toBe(10);
      expect((await hosts.getHost("host_w"))?.usage).toMatchObject({ vcpus: 10, placements: 10 });
    });

    it("cordon and uncordon; a LOST host stays LOST until it heartbeats, then comes back as it was", async () => {
      await hosts.registerHost(newHost("a"));
      await hosts.registerHost(newHost("b"));
      expect(await hosts.setCordoned("host_a", true)).toMatchObject({ state: "CORDONED", cordoned: true });
      expect(await hosts.setCordoned("nope", true)).toBeUndefined();
      await hosts.place(placement("sb1", "host_a"), { freshSince: T0, force: true });
      await hosts.place(placement("sb2", "host_b"), { freshSince: T0 });
      await hosts.heartbeat("host_b", { at: T2 });

      const lost = await hosts.markLost(T1);
      expect(lost.map((l) => [l.host.name, l.host.state, l.sandboxIds])).toEqual([["a", "LOST", ["sb1"]]]);
      expect(await hosts.markLost(T1)).toEqual([]);
      expect(await hosts.setCordoned("host_a", false)).toMatchObject({ state: "LOST", cordoned: false });
      await hosts.setCordoned("host_a", true);
      expect(await hosts.place(placement("sb3", "host_a"), { freshSince: T0 })).toBe(false);
      // Its placements stay: the control plane decides what becomes of their sandboxes.
      expect(await hosts.getPlacement("sb1")).toMatchObject({ host_id: "host_a" });
      expect(await hosts.heartbeat("host_a", { at: T2 })).toMatchObject({ state: "CORDONED", cordoned: true });
      expect(await hosts.setCordoned("host_a", false)).toMatchObject({ state: "ACTIVE", cordoned: false });
      expect((await hosts.getHost("host_b"))?.state).toBe("ACTIVE");
    });

    it("stranded starts: a placer's own, or a LOST placer's, placed on another host (no sandbox row: never admitted)", async () => {
      for (const n of ["cp1", "cp2"]) await hosts.registerHost(newHost(n));
      const big = { capacity: { vcpus: 64, memory_mib: 100_000, disk_gib: 1000, accel: "tcg" as const } };
      await hosts.registerHost(newHost("w", big));
      await hosts.place(placement("sb1", "host_w"), { freshSince: T0, placedBy: "host_cp1" });
      await hosts.place(placement("sb2", "host_w", { placed_at: T2 }), { freshSince: T0, placedBy: "host_cp2" });
      // On the placer's own host, or placed by nobody: never stranded.
      await hosts.place(placement("sb3", "host_cp1"), { freshSince: T0, force: true, placedBy: "host_cp1" });
      await hosts.place(placement("sb4", "host_w"), { freshSince: T0 });
      const ids = async (own: string) => (await hosts.strandedStarts(own)).map((s) => s.sandbox_id);
      expect(await hosts.strandedStarts("host_cp1")).toEqual([{ sandbox_id: "sb1", host_id: "host_w", placed_by: "host_cp1" }]);
      expect(await ids("host_w")).toEqual([]);
      // cp2 stops beating: once it is LOST its starts are any survivor's.
      await hosts.heartbeat("host_cp1", { at: T2 });
      await hosts.heartbeat("host_w", { at: T2 });
      expect((await hosts.markLost(T1)).map((l) => l.host.name)).toEqual(["cp2"]);
      expect(await ids("host_cp1")).toEqual(["sb1", "sb2"]);
      expect(await ids("host_w")).toEqual(["sb2"]);
      expect(await hosts.getPlacement("sb2")).toEqual(placement("sb2", "host_w", { placed_at: T2 }));
      await hosts.release("sb2");
      expect(await ids("host_w")).toEqual([]);
    });

    it("placed by a LOST peer: whatever their status; one survivor takes each over (conditional)", async () => {
      for (const n of ["cp1", "cp2", "cp3"]) await hosts.registerHost(newHost(n));
      const big = { capacity: { vcpus: 64, memory_mib: 100_000, disk_gib: 1000, accel: "tcg" as const } };
      await hosts.registerHost(newHost("w", big));
      await opened.addSandbox("sb-run", "RUNNING");
      await hosts.place(placement("sb-run", "host_w"), { freshSince: T0, placedBy: "host_cp2" });
      await hosts.place(placement("sb-none", "host_w", { vcpus: 1 }), { freshSince: T0, placedBy: "host_cp2" });
      await hosts.place(placement("sb-mine", "host_w", { vcpus: 1 }), { freshSince: T0, placedBy: "host_cp1" });
      const ids = async (own: string) => (await hosts.placedByLostPeers(own)).map((s) => s.sandbox_id);
      expect(await ids("host_cp1")).toEqual([]);
      for (const h of ["host_cp1", "host_cp3", "host_w"]) await hosts.heartbeat(h, { at: T2 });
      expect((await hosts.markLost(T1)).map((l) => l.host.name)).toEqual(["cp2"]);
      expect(await ids("host_cp1")).toEqual(["sb-none", "sb-run"]);
      expect(await ids("host_cp2")).toEqual([]);
      // Two survivors race: one wins.
      const won = await Promise.all([
        hosts.takeOverPlacement("sb-run", "host_cp2", "host_cp1"),
        hosts.takeOverPlacement("sb-run", "host_cp2", "host_cp3"),
      ]);
      expect(won.filter(Boolean)).toHaveLength(1);
      expect(await hosts.takeOverPlacement("sb-gone", "host_cp2", "host_cp1")).toBe(false);
      expect(await ids("host_cp1")).toEqual(["sb-none"]);
      const by = (await hosts.listPlacements("host_w")).find((p) => p.sandbox_id === "sb-run")?.placed_by;
      expect(by).toBe(won[0] ? "host_cp1" : "host_cp3");
    });

    it("whereabouts: the status and placement of many sandboxes in one lookup; ids without a row left out", async () => {
      await hosts.registerHost(newHost("w"));
      await opened.addSandbox("sb-run", "RUNNING");
      await opened.addSandbox("sb-end", "TERMINATED");
      await opened.addSandbox("sb-none", "PENDING");
      await hosts.place(placement("sb-run", "host_w"), { freshSince: T0 });
      await hosts.place(placement("sb-end", "host_w", { vcpus: 1 }), { freshSince: T0 });
      expect(await hosts.whereabouts(["sb-none", "sb-gone", "sb-run", "sb-end"])).toEqual([
        { sandbox_id: "sb-end", status: "TERMINATED", host_id: "host_w" },
        { sandbox_id: "sb-none", status: "PENDING", host_id: null },
        { sandbox_id: "sb-run", status: "RUNNING", host_id: "host_w" },
      ]);
      expect(await hosts.whereabouts([])).toEqual([]);
      expect(await hosts.whereabouts(["sb-gone"])).toEqual([]);
      // A whole inventory at once: more ids than one statement may bind one by one.
      const many = Array.from({ length: 40_000 }, (_, i) => `sb-x${i}`);
      expect(await hosts.whereabouts([...many, "sb-run"])).toEqual([
        { sandbox_id: "sb-run", status: "RUNNING", host_id: "host_w" },
      ]);
    });
  });
}
