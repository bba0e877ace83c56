import { expect, it } from "vitest";
import { openHostStore, openVolumeStore, openVolumeSyncs } from "../../src/store/open-store.js";
import { MADE_HERE, type VolumeRow } from "../../src/store/volume-rows.js";
import { addSandbox, attempt, NOW, type StoreContext, sandboxRow } from "./fixtures.js";

const GiB = 1024 ** 3;

function volumeRow(teamId: string, name: string, over: Partial<VolumeRow> = {}): VolumeRow {
  return {
    id: `vol-${Math.random().toString(16).slice(2, 18).padEnd(16, "0")}`,
    team_id: teamId,
    name,
    status: "CREATING",
    size_gb: 10,
    labels: { app: "rl" },
    used_bytes: 0,
    created_at: new Date(NOW).toISOString(),
    updated_at: new Date(NOW).toISOString(),
    ...MADE_HERE,
    ...over,
  };
}

/** A team "alpha" with a READY volume named `name` and a RUNNING sandbox (not mounting it yet). */
async function readyVolumeAndSandbox(ctx: StoreContext, name: string) {
  const s = ctx.store;
  const vs = openVolumeStore(s);
  const team = await s.createTeam("alpha");
  const v = volumeRow(team.id, name, { status: "READY" });
  await vs.createVolume(v, () => {});
  const sb = await addSandbox(s, team.id, { status: "RUNNING" });
  return { s, vs, team, v, sb };
}

/** Volumes, their quotas, their mounts (which hold off a delete) and their meter records. */
export function volumeCases(ctx: StoreContext): void {
  it("creates volumes with names unique per team (free again once DELETED), finds them by id or name within the team", async () => {
    const s = ctx.store;
    const vs = openVolumeStore(s);
    const a = await s.createTeam("alpha");
    const b = await s.createTeam("beta");
    const ok = () => {};
    const v = volumeRow(a.id, "data");
    expect(await vs.createVolume(v, ok)).toBe(true);
    expect(await vs.createVolume(volumeRow(a.id, "data"), ok)).toBe(false);
    expect(await vs.createVolume(volumeRow(b.id, "data"), ok)).toBe(true);
    expect(await vs.getVolume(v.id, a.id)).toEqual(v);
    expect(await vs.getVolume("data", a.id)).toEqual(v);
    expect(await vs.getVolume(v.id, b.id)).toBeUndefined();
    expect((await vs.getVolume("data", b.id))?.team_id).toBe(b.id);
    expect(await vs.setVolumeState(v.id, "READY", ["CREATING"])).toBe(true);
    expect(await vs.setVolumeState(v.id, "READY", ["CREATING"])).toBe(false);
    expect((await vs.listVolumes({ teamId: a.id })).map((x) => [x.name, x.status])).toEqual([["data", "READY"]]);
    expect(await vs.volumeUsage(a.id)).toEqual({ count: 1, size_gb: 10 });
    expect(await vs.beginDeleteVolume(v.id)).toEqual({ changed: true, mounters: [] });
    expect(await vs.setVolumeState(v.id, "DELETED", ["DELETING"])).toBe(true);
    expect(await vs.getVolume(v.id, a.id)).toBeUndefined();
    expect(await vs.volumeUsage(a.id)).toEqual({ count: 0, size_gb: 0 });
    expect(await vs.createVolume(volumeRow(a.id, "data"), ok)).toBe(true);
    // A refusing check inserts nothing.
    await expect(
      attempt(() =>
        vs.createVolume(volumeRow(a.id, "more"), (u) => {
          throw new Error(`quota at ${u.count}`);
        }),
      ),
    ).rejects.toThrow("quota at 1");
    expect(await vs.getVolume("more", a.id)).toBeUndefined();
    const reopened = openVolumeStore(await ctx.opened.reopen());
    expect((await reopened.getVolume("data", a.id))?.labels).toEqual({ app: "rl" });
  });

  it("a mount by a sandbox that has not ended holds off a delete; a volume not READY takes no mount", async () => {
    const { s, vs, team, v, sb } = await readyVolumeAndSandbox(ctx, "ws");
    expect(await vs.attachVolumes(sb.id, [{ sandbox_id: sb.id, volume_id: v.id, path: "/data", read_only: true }])).toBe(true);
    expect(await vs.mountsOf(sb.id)).toEqual([{ sandbox_id: sb.id, volume_id: v.id, path: "/data", read_only: true }]);
    expect(await vs.mountersOf(v.id)).toEqual([sb.id]);
    expect(await vs.beginDeleteVolume(v.id)).toEqual({ changed: false, mounters: [sb.id] });
    expect((await vs.getVolume(v.id))?.status).toBe("READY");
    expect(await s.updateSandbox(sb.id, { status: "TERMINATED" })).toBe(true);
    expect(await vs.mountersOf(v.id)).toEqual([]);
    expect(await vs.beginDeleteVolume(v.id)).toEqual({ changed: true, mounters: [] });
    const late = sandboxRow(team.id);
    await s.insertSandbox(late);
    expect(await vs.attachVolumes(late.id, [{ sandbox_id: late.id, volume_id: v.id, path: "/d", read_only: false }])).toBe(false);
    expect(await vs.mountsOf(late.id)).toEqual([]);
  });

  it("moves a volume between hosts: MOVING only when no sandbox mounts it, resumable to the same host, READY at its new home", async () => {
    const { s, vs, team, v, sb } = await readyVolumeAndSandbox(ctx, "roams");
    expect(await vs.attachVolumes(sb.id, [{ sandbox_id: sb.id, volume_id: v.id, path: "/d", read_only: false }])).toBe(true);
    expect(await vs.beginMoveVolume(v.id, "host-b")).toEqual({ changed: false, mounters: [sb.id] });
    expect(await s.updateSandbox(sb.id, { status: "TERMINATED" })).toBe(true);
    expect(await vs.beginMoveVolume(v.id, "host-b")).toEqual({ changed: true, mounters: [] });
    expect(await vs.getVolume(v.id)).toMatchObject({ status: "MOVING", host_id: null, move_to: "host-b" });
    // Resumed to the same host: still its move; to another: not.
    expect((await vs.beginMoveVolume(v.id, "host-b")).changed).toBe(true);
    expect((await vs.beginMoveVolume(v.id, "host-c")).changed).toBe(false);
    // No mount and no delete while it moves; listed (not DELETED).
    const late = sandboxRow(team.id);
    await s.insertSandbox(late);
    expect(await vs.attachVolumes(late.id, [{ sandbox_id: late.id, volume_id: v.id, path: "/d", read_only: false }])).toBe(false);
    expect((await vs.listVolumes({ teamId: team.id })).map((r) => r.status)).toEqual(["MOVING"]);
    expect(await vs.endMoveVolume(v.id, "host-b")).toBe(true);
    expect(await vs.endMoveVolume(v.id, "host-c")).toBe(false);
    expect(await vs.getVolume(v.id)).toMatchObject({ status: "READY", host_id: "host-b", move_to: null });
    expect(await vs.attachVolumes(late.id, [{ sandbox_id: late.id, volume_id: v.id, path: "/d", read_only: false }])).toBe(true);
  });

  it("meters a volume's measured bytes from its create until its delete begins", async () => {
    const s = ctx.store;
    const vs = openVolumeStore(s);
    let t = NOW;
    await s.setMeterClock(() => t);
    const team = await s.createTeam("alpha");
    const v = volumeRow(team.id, "m");
    await vs.createVolume(v, () => {});
    await vs.setVolumeState(v.id, "READY", ["CREATING"]);
    t += 1000;
    await vs.setVolumeUsed(v.id, GiB);
    await vs.setVolumeUsed(v.id, GiB);
    t += 3_600_000;
    await vs.beginDeleteVolume(v.id);
    const records = (await s.listMeterRecords({ teamId: team.id, fromMs: NOW - 1, toMs: t + 1 }))
      .filter((r) => r.kind === "volume")
      .map((r) => [r.subject_id, r.stored_bytes, r.start_ms - NOW, r.end_ms === null ? null : r.end_ms - NOW]);
    expect(records).toEqual([
      [v.id, 0, 0, 1000],
      [v.id, GiB, 1000, 3_601_000],
    ]);
  });

  it("records a volume's synced copy (newer only), marks a lost home, restores and records the stale copy", async () => {
    const s = ctx.store;
    const vs = openVolumeStore(s);
    const syncs = openVolumeSyncs(s);
    const hosts = openHostStore(s);
    const at = new Date(NOW).toISOString();
    const capacity = { vcpus: 4, memory_mib: 8192, disk_gib: 100, accel: "tcg" as const };
    const locality = { images: [], templates: [], layers: [] };
    for (const name of ["wa", "wb"])
      await hosts.registerHost({ id: `host_${name}`, name, capacity, locality, secret_hash: "h", at });
    const team = await s.createTeam("alpha");
    const v = volumeRow(team.id, "synced", { status: "READY", host_id: "host_wa" });
    await vs.createVolume(v, () => {});
    expect((await syncs.syncCandidates()).map((c) => [c.id, c.mounted, c.last_unmount_at])).toEqual([[v.id, false, null]]);
    const sync = (key: string, when: string) => ({ key, sha256: "a".repeat(64), bytes: 10, at: when });
    expect(await syncs.recordSync(v.id, sync("k1", "2026-01-01T00:00:01.000Z"))).toBeNull();
    expect(await syncs.recordSync(v.id, sync("k2", "2026-01-01T00:00:02.000Z"))).toBe("k1");
    expect(await syncs.recordSync(v.id, sync("k0", "2026-01-01T00:00:00.000Z"))).toBe("k0");
    expect(await vs.getVolume(v.id)).toMatchObject({ sync_key: "k2", synced_bytes: 10, synced_at: "2026-01-01T00:00:02.000Z" });

    expect((await syncs.markHomeLost("host_wa", at)).map((r) => [r.id, r.home_lost_at])).toEqual([[v.id, at]]);
    expect((await syncs.homeLost()).map((r) => r.id)).toEqual([v.id]);
    expect(await syncs.syncCandidates()).toEqual([]);
    expect((await vs.beginMoveVolume(v.id, "host_wb")).changed).toBe(true);
    expect(await syncs.clearHomeLost(v.id, "host_wb")).toBe(false);
    expect(await syncs.endRestore(v.id, "host_wb", "host_wa")).toBe(true);
    expect(await syncs.endRestore(v.id, "host_wb", "host_wa")).toBe(false);
    expect(await vs.getVolume(v.id)).toMatchObject({
      status: "READY",
      host_id: "host_wb",
      home_lost_at: null,
      restored_as_of: "2026-01-01T00:00:02.000Z",
    });
    expect(await syncs.staleCopies()).toEqual([{ volume_id: v.id, host_id: "host_wa" }]);
    await syncs.forgetStaleCopy(v.id, "host_wa");
    expect(await syncs.staleCopies()).toEqual([]);
  });
}
