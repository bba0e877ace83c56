// `volumes: "snapshot"` of restores and forks, with no VM: its validation (bad values refused
// with a code before anything starts), the snapshots VolumeService makes of a sandbox's mounts
// (new volumes of the team, named, listed, metered, deletable; their files a copy the source
// never sees written), and the Sandbox answer's `volumes`. Images resolve through a stub that
// never finishes pulling, so a sandbox stays PROVISIONING (not ended) and holds its mounts.
import { readFileSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { fakeHostAt, neverPulls, serverForFile } from "./helpers.js";

const t = serverForFile(fakeHostAt({ images: neverPulls }));

const bytes = (s: string) => new TextEncoder().encode(s);

describe("volume snapshots", () => {
  it("refuses bad values of volumes on a fork or a create, with a code, before anything starts", async () => {
    const sb = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(sb.status).toBe(201);
    for (const body of [{ volumes: "copy" }, { volumes: ["x"] }, { volumes: true }]) {
      const r = await t.api("POST", `/v1/sandboxes/${sb.body.id}/fork`, body);
      expect([JSON.stringify(body), r.status, r.body.code]).toEqual([JSON.stringify(body), 400, "VALIDATION_FAILED"]);
    }
    const memory = await t.api("POST", `/v1/sandboxes/${sb.body.id}/fork`, { memory: true, volumes: "snapshot" });
    expect([memory.status, memory.body.code, memory.body.details?.field]).toEqual([400, "VALIDATION_FAILED", "volumes"]);
    // Without checkpoint_id there is no source sandbox to take volumes from.
    for (const volumes of ["snapshot", "shared", "copy"]) {
      const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", volumes });
      expect([volumes, r.status, r.body.code]).toEqual([volumes, 400, "VALIDATION_FAILED"]);
    }
    const restore = await t.api("POST", "/v1/sandboxes", { checkpoint_id: "ck-nope", volumes: "copy" });
    expect(restore.status).toBeGreaterThanOrEqual(400);
    expect((await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`)).status).toBeLessThan(300);
  });

  it("snapshots each volume a sandbox mounts as a new volume of the team, whose writes never reach the source", async () => {
    const v = (await t.api("POST", "/v1/volumes", { name: "workspace", size_gb: 3, labels: { app: "rl" } })).body;
    await t.api("PUT", `/v1/volumes/${v.id}/files?path=/repo/a.txt`, bytes("before"));
    const sb = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    const svc = t.server.services.volumes;
    await svc.attach(sb.body.id, [{ volume_id: v.id, path: "/ws", read_only: false }]);
    // The Sandbox answer lists its volumes (one query per answer, lists too).
    const got = await t.api("GET", `/v1/sandboxes/${sb.body.id}`);
    expect(got.body.volumes).toEqual([{ volume_id: v.id, name: "workspace", path: "/ws", read_only: false }]);
    const listed = await t.api("GET", "/v1/sandboxes?limit=1000");
    const mine = listed.body.sandboxes.find((s: { id: string }) => s.id === sb.body.id);
    expect(mine.volumes).toHaveLength(1);

    const snaps = await svc.snapshotMounts(v.team_id, sb.body.id);
    expect(snaps).toHaveLength(1);
    const snap = (await t.api("GET", `/v1/volumes/${snaps[0]?.volume}`)).body;
    expect(snaps[0]).toMatchObject({ path: "/ws", read_only: false });
    expect(snap).toMatchObject({ status: "READY", size_gb: 3, team_id: v.team_id, used_bytes: 6 });
    expect(snap.name).toMatch(/^workspace-snap-[0-9a-f]{6}$/);
    expect(snap.labels).toEqual({ app: "rl", "sandtree/snapshot-of": v.id });
    expect((await t.api("GET", "/v1/volumes")).body.volumes.map((x: { id: string }) => x.id)).toContain(snap.id);
    // As it was; then each side's writes stay on its side.
    expect((await t.api("GET", `/v1/volumes/${snap.id}/files?path=/repo/a.txt`)).body).toBe("before");
    await t.api("PUT", `/v1/volumes/${snap.id}/files?path=/repo/a.txt`, bytes("child"));
    await t.api("PUT", `/v1/volumes/${v.id}/files?path=/repo/b.txt`, bytes("parent"));
    expect((await t.api("GET", `/v1/volumes/${v.id}/files?path=/repo/a.txt`)).body).toBe("before");
    expect((await t.api("GET", `/v1/volumes/${snap.id}/files/stat?path=/repo/b.txt`)).status).toBe(404);
    expect(readFileSync(path.join(t.dataDir, "volumes", v.id, "data", "repo", "a.txt"), "utf8")).toBe("before");
    // A snapshot is a volume like any: deleted with its files.
    expect((await t.api("DELETE", `/v1/volumes/${snap.id}`)).status).toBe(204);
    // Quotas count snapshots: a team without room gets its quota's code and no volume.
    await t.api("PUT", "/v1/teams/default/limits", { max_volume_gb: 4 });
    await expect(svc.snapshotMounts(v.team_id, sb.body.id)).rejects.toMatchObject({ code: "QUOTA_VOLUME_STORAGE" });
    await t.api("PUT", "/v1/teams/default/limits", { max_volume_gb: 10_240 });
    expect((await t.api("GET", "/v1/volumes")).body.volumes.filter((x: { name: string }) => x.name.includes("-snap-"))).toEqual(
      [],
    );
    expect((await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`)).status).toBeLessThan(300);
  });

  it("a GET answers the used bytes measured within measureTtlMs; an API write counts at once", async () => {
    const v = (await t.api("POST", "/v1/volumes", { name: "cached", size_gb: 1 })).body;
    const guest = path.join(t.dataDir, "volumes", v.id, "data", "guest");
    writeFileSync(guest, "");
    truncateSync(guest, 5000);
    // Measured at its create: a GET does not walk again within the TTL (30 s by default)...
    expect((await t.api("GET", `/v1/volumes/${v.id}`)).body.used_bytes).toBe(0);
    // ... an API write walks first (its size check counts what guests wrote) and adds its bytes ...
    await t.api("PUT", `/v1/volumes/${v.id}/files?path=/api`, bytes("12345"));
    expect((await t.api("GET", `/v1/volumes/${v.id}`)).body.used_bytes).toBe(5005);
    truncateSync(guest, 7000);
    expect((await t.api("GET", `/v1/volumes/${v.id}`)).body.used_bytes).toBe(5005);
    // ... and once the figure is older than the TTL, the next GET walks.
    t.server.services.volumes.measureTtlMs = 0;
    try {
      expect((await t.api("GET", `/v1/volumes/${v.id}`)).body.used_bytes).toBe(7005);
    } finally {
      t.server.services.volumes.measureTtlMs = 30_000;
    }
    expect((await t.api("DELETE", `/v1/volumes/${v.id}`)).status).toBe(204);
  });
});
