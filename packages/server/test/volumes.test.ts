// Volumes through the HTTP API with no VM: the resource, its directory on the host, its file
// API, quotas, metering, team isolation and a create's `volumes` (validated, then refused until
// they can be mounted). Images resolve through a stub that never finishes pulling, so a sandbox
// stays PROVISIONING (not ended) to hold a mount.
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { openVolumeStore } from "../src/store/open-store.js";
import { fakeHostAt, neverPulls, serverForFile } from "./helpers.js";

const t = serverForFile(fakeHostAt({ images: neverPulls }));

const bytes = (s: string) => new TextEncoder().encode(s);

async function newTeam(name: string) {
  expect((await t.api("POST", "/v1/teams", { name })).status).toBe(201);
  const k = await t.api("POST", "/v1/keys", { team: name });
  return (method: string, p: string, body?: unknown) => t.api(method, p, body, { authorization: `Bearer ${k.body.key}` });
}

describe("volumes as a resource", () => {
  it("creates, lists, gets by id or name and deletes; its directory lives and goes with it", async () => {
    const c = await t.api("POST", "/v1/volumes", { name: "data", size_gb: 2, labels: { app: "rl" } });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({
      name: "data",
      size_gb: 2,
      status: "READY",
      used_bytes: 0,
      labels: { app: "rl" },
      mounted_by: [],
    });
    expect(c.body.id).toMatch(/^vol-[0-9a-f]{16}$/);
    const dir = path.join(t.dataDir, "volumes", c.body.id, "data");
    expect(statSync(dir).isDirectory()).toBe(true);
    expect((await t.api("POST", "/v1/volumes", { name: "data" })).body.code).toBe("ALREADY_EXISTS");
    expect((await t.api("POST", "/v1/volumes", { name: "bad name" })).status).toBe(400);
    expect((await t.api("POST", "/v1/volumes", { name: "x", size_gb: 0 })).status).toBe(400);
    expect((await t.api("GET", `/v1/volumes/${c.body.id}`)).body.name).toBe("data");
    expect((await t.api("GET", "/v1/volumes/data")).body.id).toBe(c.body.id);
    expect((await t.api("GET", "/v1/volumes")).body.volumes.map((v: { name: string }) => v.name)).toContain("data");
    expect((await t.api("DELETE", "/v1/volumes/data")).status).toBe(204);
    expect(existsSync(path.join(t.dataDir, "volumes", c.body.id))).toBe(false);
    expect((await t.api("GET", `/v1/volumes/${c.body.id}`)).body.code).toBe("VOLUME_NOT_FOUND");
    expect((await t.api("DELETE", `/v1/volumes/${c.body.id}`)).status).toBe(404);
    // The name is free again.
    expect((await t.api("POST", "/v1/volumes", { name: "data", size_gb: 1 })).status).toBe(201);
    expect((await t.api("DELETE", "/v1/volumes/data")).status).toBe(204);
  });

  it("a delete is refused while a sandbox that has not ended mounts it, and goes through once it ended", async () => {
    const v = (await t.api("POST", "/v1/volumes", { name: "shared" })).body;
    const sb = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(sb.status).toBe(201);
    // What a create will record once volumes can be mounted (the mount medium is wired separately).
    const store = openVolumeStore(t.server.store);
    await t.server.services.volumes.attach(sb.body.id, [{ volume_id: v.id, path: "/data", read_only: false }]);
    expect((await t.api("GET", "/v1/volumes/shared")).body.mounted_by).toEqual([sb.body.id]);
    // What its machine is given: the volume by id, which its host finds in its own volumes directory (no path).
    expect(await t.server.services.volumes.machineMounts(sb.body.id)).toEqual([
      { volume: v.id, guestPath: "/data", readOnly: false },
    ]);
    const refused = await t.api("DELETE", "/v1/volumes/shared");
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "VOLUME_IN_USE", details: { sandboxes: [sb.body.id] } });
    expect((await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`)).status).toBeLessThan(300);
    for (let i = 0; i < 100 && (await t.api("GET", "/v1/volumes/shared")).body.mounted_by?.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await t.api("DELETE", "/v1/volumes/shared")).status).toBe(204);
    // A deleted volume takes no new mount.
    expect(
      await store.attachVolumes("sb-other", [{ sandbox_id: "sb-other", volume_id: v.id, path: "/d", read_only: false }]),
    ).toBe(false);
    const late = t.server.services.volumes.attach("sb-other", [{ volume_id: v.id, path: "/d", read_only: false }]);
    await expect(late).rejects.toMatchObject({ code: "CONFLICT" });
  });

  it("team quotas bound the count and the GiB of volumes", async () => {
    const as = await newTeam("volquota");
    expect((await t.api("PUT", "/v1/teams/volquota/limits", { max_volumes: 2, max_volume_gb: 5 })).status).toBe(200);
    expect((await as("POST", "/v1/volumes", { name: "a", size_gb: 3 })).status).toBe(201);
    const big = await as("POST", "/v1/volumes", { name: "b", size_gb: 3 });
    expect(big.status).toBe(429);
    expect(big.body).toMatchObject({ code: "QUOTA_VOLUME_STORAGE", details: { limit: 5, used: 3, requested: 3 } });
    expect((await as("POST", "/v1/volumes", { name: "b", size_gb: 2 })).status).toBe(201);
    expect((await as("POST", "/v1/volumes", { name: "c", size_gb: 1 })).body.code).toBe("QUOTA_VOLUMES");
    const limits = await as("GET", "/v1/teams/volquota/limits");
    expect(limits.body.usage).toMatchObject({ volumes: 2, volume_gb: 5 });
    expect(limits.body.limits).toMatchObject({ max_volumes: 2, max_volume_gb: 5 });
  });

  it("another team gets 404 on every volume route and cannot name the volume on create", async () => {
    const v = (await t.api("POST", "/v1/volumes", { name: "private" })).body;
    await t.api("PUT", `/v1/volumes/${v.id}/files?path=/secret`, bytes("s3cret"));
    const other = await newTeam("volother");
    for (const [m, p] of [
      ["GET", `/v1/volumes/${v.id}`],
      ["GET", "/v1/volumes/private"],
      ["DELETE", `/v1/volumes/${v.id}`],
      ["GET", `/v1/volumes/${v.id}/files?path=/secret`],
      ["GET", `/v1/volumes/${v.id}/files/list?path=/`],
      ["GET", `/v1/volumes/${v.id}/files/stat?path=/secret`],
      ["DELETE", `/v1/volumes/${v.id}/files?path=/secret`],
    ] as const) {
      const r = await other(m, p);
      expect([m, p, r.status, r.body.code]).toEqual([m, p, 404, "VOLUME_NOT_FOUND"]);
    }
    expect((await other("PUT", `/v1/volumes/${v.id}/files?path=/x`, bytes("x"))).status).toBe(404);
    expect((await other("POST", `/v1/volumes/${v.id}/files/mkdir`, { path: "/d" })).status).toBe(404);
    expect((await other("GET", "/v1/volumes")).body.volumes).toEqual([]);
    const create = await other("POST", "/v1/sandboxes", {
      image: "sandtree/busybox",
      volumes: [{ volume: v.id, path: "/data" }],
    });
    expect([create.status, create.body.code]).toEqual([404, "VOLUME_NOT_FOUND"]);
    expect((await t.api("GET", `/v1/volumes/${v.id}/files?path=/secret`)).body).toBe("s3cret");
  });
});

describe("a create's volumes", () => {
  it("are validated (the team's volume, an absolute path, not /, /proc, /sys, /dev, no duplicates), then refused with NOT_SUPPORTED", async () => {
    await t.api("POST", "/v1/volumes", { name: "ws" });
    await t.api("POST", "/v1/volumes", { name: "ws2" });
    const create = (volumes: unknown) => t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", volumes });
    for (const bad of [
      [{ volume: "ws", path: "data" }],
      [{ volume: "ws", path: "/" }],
      [{ volume: "ws", path: "//" }],
      [{ volume: "ws", path: "/proc/x" }],
      [{ volume: "ws", path: "/sys" }],
      [{ volume: "ws", path: "/dev/shm" }],
      [{ volume: "ws", path: "/a/../proc" }],
      [
        { volume: "ws", path: "/a" },
        { volume: "ws2", path: "/a/" },
      ],
      [
        { volume: "ws", path: "/a" },
        { volume: "ws", path: "/b" },
      ],
      [{ volume: "ws", path: "/a", extra: 1 }],
    ]) {
      const r = await create(bad);
      expect([JSON.stringify(bad), r.status, r.body.code]).toEqual([JSON.stringify(bad), 400, "VALIDATION_FAILED"]);
    }
    expect((await create([{ volume: "nope", path: "/data" }])).body.code).toBe("VOLUME_NOT_FOUND");
    const ws = (await t.api("GET", "/v1/volumes/ws")).body;
    const refused = await create([
      { volume: "ws", path: "/data" },
      { volume: ws.id === "x" ? "ws" : "ws2", path: "/cache", read_only: true },
    ]);
    expect(refused.status).toBe(501);
    expect(refused.body.code).toBe("NOT_SUPPORTED");
    expect(refused.body.message).toMatch(/volumes cannot be mounted/);
    // Nothing was created by the refused call.
    const list = await t.api("GET", "/v1/sandboxes?limit=1000");
    expect(list.body.sandboxes.filter((s: { status: string }) => s.status === "PENDING")).toEqual([]);
  });
});
