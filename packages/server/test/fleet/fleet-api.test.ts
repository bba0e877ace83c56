// Fleet mode's HTTP API on a real server (no VM): joining, heartbeats and their secrets, the
// admin host list, cordon/drain/uncordon, placement by locality and capacity, HOST_LOST.
// Time is a ManualClock: the HOST_LOST bound is crossed by advancing it, never by waiting.
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "@sandtree/host/fake";
import type { CreateSandboxParams, Sandbox } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, type RunningServer, startServer } from "../../src/index.js";
import { type Api, jsonApi } from "../helpers.js";
import { bundleOpened, serveFakeWorker } from "./fake-worker.js";

const BOUND_MS = 30_000;

describe("fleet API", () => {
  let server: RunningServer;
  let dataDir: string;
  let admin: Api;
  let member: Api;
  const clock = new ManualClock(Date.parse("2026-06-01T00:00:00Z"));
  const as = (token: string) => jsonApi(server.url, () => token);
  const capacity = { vcpus: 8, memory_mib: 16_384, disk_gib: 100, accel: "tcg" };

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-fleet-"));
    server = await startServer(
      { dataDir, host: "127.0.0.1", port: 0, logger: false, network: "off", hostLostAfterMs: BOUND_MS },
      { fleetClock: clock },
    );
    admin = as(server.firstKey ?? "");
    await admin("POST", "/v1/teams", { name: "members" });
    const key = await admin("POST", "/v1/keys", { team: "members" });
    member = as(key.body.key);
    // The local host is real (this machine): keep it out of the placements below.
    expect((await admin("POST", "/v1/hosts/local/cordon")).status).toBe(200);
  });

  afterAll(async () => {
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const register = (name: string, token = server.services.fleet.joinToken, body: object = {}) =>
    as(token)("POST", "/v1/fleet/hosts/register", { name, capacity, ...body });

  it("keeps a join token in <data-dir>/join-token (0600); only it registers a host", async () => {
    const file = path.join(dataDir, "join-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(server.services.fleet.joinTokenFile).toBe(file);
    const wrong = await register("w-wrong", "stj_not-the-token");
    expect([wrong.status, wrong.body.code]).toEqual([401, "UNAUTHORIZED"]);
    const apiKey = await register("w-wrong", server.firstKey ?? "");
    expect([apiKey.status, apiKey.body.code]).toEqual([401, "UNAUTHORIZED"]);
    const local = await register("local");
    expect([local.status, local.body.code]).toEqual([409, "ALREADY_EXISTS"]);
    const bad = await register("w1", undefined, { capacity: { ...capacity, vcpus: 0 } });
    expect([bad.status, bad.body.code, bad.body.details.field]).toEqual([400, "VALIDATION_FAILED", "capacity.vcpus"]);
    const ok = await register("w1", undefined, { locality: { images: ["sha256:img"] } });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ name: "w1", heartbeat_interval_ms: 5000 });
    expect(ok.body.host_id).toMatch(/^host_/);
    expect(ok.body.secret).toMatch(/^sth_/);
  });

  it("heartbeats need the host's own secret; the list never shows it", async () => {
    const a = (await register("hb-a")).body;
    const b = (await register("hb-b")).body;
    const beat = (id: string, secret: string, body: object = {}) => as(secret)("POST", `/v1/fleet/hosts/${id}/heartbeat`, body);
    expect((await beat(a.host_id, b.secret)).body.code).toBe("UNAUTHORIZED");
    expect((await beat(a.host_id, server.services.fleet.joinToken)).status).toBe(401);
    expect((await beat("host_nope", a.secret)).status).toBe(401);
    const ok = await beat(a.host_id, a.secret, { locality: { templates: ["t1"], layers: ["l1"] } });
    expect([ok.status, ok.body.state]).toEqual([200, "ACTIVE"]);
    const list = await admin("GET", "/v1/hosts");
    const shown = list.body.hosts.find((h: { name: string }) => h.name === "hb-a");
    expect(shown).toMatchObject({ state: "ACTIVE", capacity, locality: { images: 0, templates: 1, layers: 1 } });
    expect(JSON.stringify(list.body)).not.toContain(a.secret);
    expect(JSON.stringify(list.body)).not.toContain("secret");
  });

  it("lists hosts to admin keys only, the local host with this machine's capacity", async () => {
    const denied = await member("GET", "/v1/hosts");
    expect([denied.status, denied.body.code]).toEqual([403, "FORBIDDEN"]);
    const { body } = await admin("GET", "/v1/hosts");
    const local = body.hosts.find((h: { name: string }) => h.name === "local");
    expect(local).toMatchObject({ state: "CORDONED", cordoned: true, usage: { placements: 0 } });
    expect(local.capacity.vcpus).toBeGreaterThanOrEqual(1);
    expect(local.capacity.memory_mib).toBeGreaterThan(100);
    expect((await member("POST", "/v1/hosts/w1/drain")).status).toBe(403);
    expect((await member("POST", "/v1/fleet/placements", { sandbox_id: "x", vcpus: 1, memory_mib: 1, disk_gib: 0 })).status).toBe(
      403,
    );
  });

  it("places by locality, records the reservation, honours pins and refuses clearly", async () => {
    await register("p-big", undefined, { capacity: { ...capacity, vcpus: 64, memory_mib: 262_144 } });
    await register("p-layers", undefined, { locality: { layers: ["ck-l1", "ck-l2"] } });
    for (const h of ["w1", "hb-a", "hb-b"]) await admin("POST", `/v1/hosts/${h}/cordon`);
    const place = (body: object) => admin("POST", "/v1/fleet/placements", { vcpus: 2, memory_mib: 2048, disk_gib: 10, ...body });

    const byLayers = await place({ sandbox_id: "sb-1", layers: ["ck-l1", "ck-l2"] });
    expect([byLayers.status, byLayers.body.host]).toEqual([201, "p-layers"]);
    expect(byLayers.body).toMatchObject({ sandbox_id: "sb-1", vcpus: 2, memory_mib: 2048, disk_gib: 10 });
    const spread = await place({ sandbox_id: "sb-2" });
    expect(spread.body.host).toBe("p-big");
    const again = await place({ sandbox_id: "sb-2" });
    expect([again.status, again.body.code]).toEqual([409, "ALREADY_EXISTS"]);
    const pinned = await place({ sandbox_id: "sb-3", host: "p-layers" });
    expect(pinned.body.host).toBe("p-layers");
    const tooBig = await place({ sandbox_id: "sb-4", vcpus: 9, host: "p-layers" });
    expect([tooBig.status, tooBig.body.code, tooBig.body.details]).toEqual([
      503,
      "NO_CAPACITY",
      { host: "p-layers", reason: "full" },
    ]);
    const nowhere = await place({ sandbox_id: "sb-5", vcpus: 65 });
    expect([nowhere.status, nowhere.body.code]).toEqual([503, "NO_CAPACITY"]);
    const unknown = await place({ sandbox_id: "sb-6", host: "zz" });
    expect([unknown.status, unknown.body.code]).toEqual([404, "HOST_NOT_FOUND"]);
    const kvm = await place({ sandbox_id: "sb-7", accel: "kvm" });
    expect([kvm.status, kvm.body.details.accel]).toEqual([503, 2]);

    const hosts = (await admin("GET", "/v1/hosts")).body.hosts as Array<{ name: string; usage: object }>;
    expect(hosts.find((h) => h.name === "p-layers")?.usage).toEqual({ vcpus: 4, memory_mib: 4096, disk_gib: 20, placements: 2 });
    expect((await admin("DELETE", "/v1/fleet/placements/sb-3")).body).toEqual({ released: true });
    expect((await admin("DELETE", "/v1/fleet/placements/sb-3")).body).toEqual({ released: false });
  });

  it("drain cordons (no new work, its sandboxes stay); uncordon takes work again; unknown names 404", async () => {
    const drained = await admin("POST", "/v1/hosts/p-layers/drain");
    expect(drained.status).toBe(200);
    expect(drained.body).toMatchObject({ host: { name: "p-layers", state: "CORDONED", cordoned: true }, remaining_sandboxes: 1 });
    const refused = await admin("POST", "/v1/fleet/placements", {
      sandbox_id: "sb-8",
      vcpus: 1,
      memory_mib: 1,
      disk_gib: 0,
      host: "p-layers",
    });
    expect([refused.status, refused.body.details.reason]).toEqual([503, "not_active"]);
    const back = await admin("POST", "/v1/hosts/p-layers/uncordon");
    expect(back.body).toMatchObject({ host: { state: "ACTIVE", cordoned: false }, remaining_sandboxes: 1 });
    const missing = await admin("POST", "/v1/hosts/nope/drain");
    expect([missing.status, missing.body.code]).toEqual([404, "HOST_NOT_FOUND"]);
  });

  it("without an object store a create that mounts volumes is placed on their host, and refused pinned elsewhere", async () => {
    // A worker that serves its host (a fake one, on loopback): placement reaches it through its bundle.
    const worker = await serveFakeWorker((dir) => new FakeHost({ dir }));
    const token = server.services.fleet.joinToken;
    await worker.join((extra) => register("vol-w", token, extra), token);
    await bundleOpened(server, "vol-w");
    const remote = server.services.remote;
    const made = await admin("POST", "/v1/volumes", { name: "data" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const team_id = made.body.team_id as string;
    const sb = (id: string) => ({ id, team_id, cpu_cores: 1, memory_gb: 0.125, disk_size_gb: 1 }) as Sandbox;
    const params = (extra: object = {}) => ({ image: "sandtree/busybox", ...extra }) as CreateSandboxParams;
    const withVolume = { volumes: [{ volume: "data", path: "/data", read_only: false }] };
    // Without volumes the worker takes it (the local host is cordoned).
    expect((await remote.place(sb("sb-v1"), params()))?.name).toBe("vol-w");
    await remote.unplace("sb-v1");
    // With one: only the local host may take it, and it is cordoned.
    await expect(remote.place(sb("sb-v2"), params(withVolume))).rejects.toMatchObject({ code: "NO_CAPACITY" });
    await expect(remote.place(sb("sb-v3"), params({ ...withVolume, host: "vol-w" }))).rejects.toMatchObject({
      code: "VOLUME_NOT_ON_HOST",
    });
    expect((await admin("POST", "/v1/hosts/local/uncordon")).status).toBe(200);
    try {
      expect(await remote.place(sb("sb-v4"), params(withVolume))).toBeNull();
      const local = (await admin("GET", "/v1/hosts")).body.hosts.find((h: { name: string }) => h.name === "local");
      expect(local.usage.placements).toBe(1);
      await remote.unplace("sb-v4");
    } finally {
      expect((await admin("POST", "/v1/hosts/local/cordon")).status).toBe(200);
      await worker.close();
    }
  });

  it("a host silent past the bound is LOST with its sandboxes reported; a heartbeat brings it back", async () => {
    const lone = (await register("lost-1")).body;
    await admin("POST", "/v1/fleet/placements", { sandbox_id: "sb-lost", vcpus: 1, memory_mib: 1, disk_gib: 0, host: "lost-1" });
    expect(await server.services.fleet.reap()).toEqual([]);
    clock.advance(BOUND_MS + 1000);
    const lost = await server.services.fleet.reap();
    const mine = lost.find((l) => l.host.name === "lost-1");
    expect(mine?.sandboxIds).toEqual(["sb-lost"]);
    const listed = (await admin("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string }>;
    expect(listed.find((h) => h.name === "lost-1")?.state).toBe("LOST");
    expect(listed.find((h) => h.name === "local")?.state).toBe("CORDONED");
    const pinned = await admin("POST", "/v1/fleet/placements", {
      sandbox_id: "sb-x",
      vcpus: 1,
      memory_mib: 1,
      disk_gib: 0,
      host: "lost-1",
    });
    expect([pinned.status, pinned.body.details.reason]).toEqual([503, "not_active"]);
    const beat = await as(lone.secret)("POST", `/v1/fleet/hosts/${lone.host_id}/heartbeat`, {});
    expect([beat.status, beat.body.state]).toEqual([200, "ACTIVE"]);
  });
});
