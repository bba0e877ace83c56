import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import { expect, it } from "vitest";
import { addSandbox, iso, LONG_AGO, NOW, type StoreContext, sandboxRow, twoTeams } from "./fixtures.js";

const ACTIVE: SandboxStatus[] = ["PENDING", "PROVISIONING", "RUNNING", "PAUSED"];
const ids = (list: Sandbox[]) => list.map((x) => x.id);

/** Sandbox rows: reads scoped by team, listing, conditional status changes, activity and events. */
export function sandboxCases(ctx: StoreContext): void {
  it("reads a sandbox back as written, only within its team", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const sb = await addSandbox(s, team.id, {
      name: "web-1",
      environment_vars: { A: "1", PATH: "/bin" },
      labels: { env: "prod", "app.kubernetes.io/name": "x" },
      start_command: "sleep 1000",
      accel: "tcg",
    });
    expect(await s.getSandbox(sb.id)).toMatchObject(sb);
    expect(await s.getSandbox(sb.id, team.id)).toMatchObject(sb);
    expect(await s.getSandbox(sb.id, other.id)).toBeUndefined();
    expect(await s.getSandbox("sb-missing")).toBeUndefined();
    // Every field a Sandbox can carry is kept (cost_usd is computed, never stored).
    const full = sandboxRow(team.id, {
      status: "RUNNING",
      image_digest: "sha256:ff",
      secrets: { TOKEN: "***" },
      started_at: iso(NOW),
      timeout_minutes: 30,
      idle_timeout_minutes: 0.5,
      expires_at: iso(NOW + 30 * 60_000),
      last_activity_at: iso(NOW),
      start_path: "warm",
      source_checkpoint_id: "ck-src",
      head_checkpoint_id: "ck-head",
      display: "1280x800",
      nested_virtualization: true,
    });
    await s.insertSandbox(full);
    expect(await s.getSandbox(full.id)).toEqual(full);
  });

  it("applies a patch, stamping updated_at, and a status change only from the given statuses", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id);
    expect(await s.updateSandbox(sb.id, { image_digest: "sha256:d", labels: { a: "b" }, timeout_minutes: 5 })).toBe(true);
    const patched = await s.getSandbox(sb.id);
    expect(patched).toMatchObject({ image_digest: "sha256:d", labels: { a: "b" }, timeout_minutes: 5, status: "PENDING" });
    expect(patched && patched.updated_at > LONG_AGO).toBe(true);
    expect(await s.updateSandbox("sb-missing", { name: "x" })).toBe(false);

    expect(await s.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"])).toBe(true);
    // A second provisioner finds the sandbox no longer PENDING.
    expect(await s.updateSandbox(sb.id, { status: "PROVISIONING", error_reason: "twice" }, ["PENDING"])).toBe(false);
    expect(await s.getSandbox(sb.id)).toMatchObject({ status: "PROVISIONING", error_reason: null, error_code: null });
    const started = iso(NOW);
    expect(await s.updateSandbox(sb.id, { status: "RUNNING", started_at: started }, ["PROVISIONING"])).toBe(true);
    expect(await s.getSandbox(sb.id)).toMatchObject({ status: "RUNNING", started_at: started });
    // An end in ERROR keeps its stable code beside the sentence.
    const end = { status: "ERROR", error_code: "GUEST_RESET", error_reason: "the guest reset", terminated_at: iso(NOW) } as const;
    expect(await s.updateSandbox(sb.id, end, ["RUNNING"])).toBe(true);
    expect(await s.getSandbox(sb.id)).toMatchObject(end);
  });

  it("lets a delete racing a create win: the sandbox ends TERMINATED in either order", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const terminated = { status: "TERMINATED", terminated_at: iso(NOW) } as const;
    const running = { status: "RUNNING", started_at: iso(NOW) } as const;
    // Delete first: provisioning's RUNNING is refused.
    const a = await addSandbox(s, team.id, { status: "PROVISIONING" });
    expect(await s.updateSandbox(a.id, terminated, ACTIVE)).toBe(true);
    expect(await s.updateSandbox(a.id, running, ["PROVISIONING"])).toBe(false);
    expect(await s.getSandbox(a.id)).toMatchObject({ ...terminated, started_at: null });
    // Provisioning first: the delete still applies.
    const b = await addSandbox(s, team.id, { status: "PROVISIONING" });
    expect(await s.updateSandbox(b.id, running, ["PROVISIONING"])).toBe(true);
    expect(await s.updateSandbox(b.id, terminated, ACTIVE)).toBe(true);
    expect((await s.getSandbox(b.id))?.status).toBe("TERMINATED");
    // Issued together (an async store may interleave them): TERMINATED all the same.
    const c = await addSandbox(s, team.id, { status: "PROVISIONING" });
    await Promise.all([s.updateSandbox(c.id, running, ["PROVISIONING"]), s.updateSandbox(c.id, terminated, ACTIVE)]);
    expect((await s.getSandbox(c.id))?.status).toBe("TERMINATED");
    // Ended is ended: no later transition from an active status applies.
    expect(await s.updateSandbox(c.id, { status: "ERROR", error_reason: "late" }, ACTIVE)).toBe(false);
    expect(await s.getSandbox(c.id)).toMatchObject({ status: "TERMINATED", error_reason: null });
  });

  it("lists a team's sandboxes newest first, by status and labels, page by page", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const made: Sandbox[] = [];
    for (let i = 0; i < 7; i++) {
      made.push(
        await addSandbox(s, team.id, {
          status: i % 2 === 0 ? "RUNNING" : "PAUSED",
          labels: { idx: String(i), tier: i < 4 ? "a" : "b", ...(i === 5 ? { extra: "y" } : {}) },
        }),
      );
    }
    await addSandbox(s, other.id, { status: "RUNNING", labels: { tier: "a" } });
    const newestFirst = ids(made).reverse();

    const all = await s.listSandboxes(team.id, { limit: 100 });
    expect(ids(all.sandboxes)).toEqual(newestFirst);
    expect(all.lastSeq).toBeNull();
    expect(all.sandboxes[0]).toMatchObject(made[6] as Sandbox);

    const paged: string[] = [];
    let beforeSeq: number | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await s.listSandboxes(team.id, { limit: 3, ...(beforeSeq !== undefined ? { beforeSeq } : {}) });
      expect(page.sandboxes.length).toBeLessThanOrEqual(3);
      paged.push(...ids(page.sandboxes));
      if (page.lastSeq === null) break;
      beforeSeq = page.lastSeq;
    }
    expect(paged).toEqual(newestFirst);

    const paused = await s.listSandboxes(team.id, { status: "PAUSED", limit: 100 });
    expect(ids(paused.sandboxes)).toEqual([made[5], made[3], made[1]].map((x) => x?.id));
    const tierB = await s.listSandboxes(team.id, { labels: { tier: "b" }, limit: 100 });
    expect(ids(tierB.sandboxes)).toEqual([made[6], made[5], made[4]].map((x) => x?.id));
    const both = await s.listSandboxes(team.id, { labels: { tier: "b", extra: "y" }, status: "PAUSED", limit: 100 });
    expect(ids(both.sandboxes)).toEqual([made[5]?.id]);
    expect((await s.listSandboxes(team.id, { labels: { tier: "c" }, limit: 100 })).sandboxes).toEqual([]);
    expect(ids((await s.listSandboxes(other.id, { limit: 100 })).sandboxes)).toHaveLength(1);
  });

  it("lists sandboxes of every team by status", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const r1 = await addSandbox(s, team.id, { status: "RUNNING" });
    const p1 = await addSandbox(s, other.id, { status: "PROVISIONING" });
    await addSandbox(s, team.id, { status: "TERMINATED" });
    const r2 = await addSandbox(s, other.id, { status: "RUNNING" });
    const byStatus = await s.listSandboxesByStatus(["PROVISIONING", "RUNNING"]);
    expect(ids(byStatus).sort()).toEqual([r1.id, p1.id, r2.id].sort());
    expect(await s.listSandboxesByStatus(["ERROR"])).toEqual([]);
  });

  it("records activity without touching updated_at, and keeps the newest events in order", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id, { status: "RUNNING" });
    const at = iso(NOW + 60_000);
    await s.touchSandbox(sb.id, at);
    expect(await s.getSandbox(sb.id)).toMatchObject({ last_activity_at: at, updated_at: LONG_AGO });

    expect(await s.listEvents(sb.id, 10)).toEqual([]);
    for (const m of ["created", "provisioning", "running", "paused"]) await s.addEvent(sb.id, m);
    const events = await s.listEvents(sb.id, 10);
    expect(events.map((e) => e.message)).toEqual(["created", "provisioning", "running", "paused"]);
    for (const e of events) expect(Number.isNaN(Date.parse(e.at))).toBe(false);
    expect((await s.listEvents(sb.id, 2)).map((e) => e.message)).toEqual(["running", "paused"]);
    expect(await s.listEvents("sb-other", 10)).toEqual([]);
  });

  it("keeps sandboxes and their events across a restart", async () => {
    const team = await ctx.store.createTeam("alpha");
    const sb = sandboxRow(team.id, { labels: { k: "v" } });
    await ctx.store.insertSandbox(sb);
    await ctx.store.addEvent(sb.id, "created");
    ctx.store = await ctx.opened.reopen();
    expect(await ctx.store.getSandbox(sb.id)).toMatchObject(sb);
    expect((await ctx.store.listEvents(sb.id, 10)).map((e) => e.message)).toEqual(["created"]);
  });
}
