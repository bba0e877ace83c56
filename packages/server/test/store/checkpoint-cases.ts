import { expect, it } from "vitest";
import { addSandbox, checkpointRow, LONG_AGO, type StoreContext, twoTeamsTwoRunning } from "./fixtures.js";

/** Checkpoint rows: reads scoped by team, filters, conditional state patches, deletion, chains in use. */
export function checkpointCases(ctx: StoreContext): void {
  it("reads a checkpoint back as written, only within its team, and lists them oldest first", async () => {
    const s = ctx.store;
    const { team, other, sb, sb2 } = await twoTeamsTwoRunning(s);
    const theirs = await addSandbox(s, other.id, { status: "RUNNING" });
    const root = checkpointRow(team.id, sb.id, { state: "DURABLE", stored_bytes: 1234, sha256: "aa", blob_key: "ck-root.qcow2" });
    const child = checkpointRow(team.id, sb.id, {
      parent_id: root.id,
      depth: 1,
      expires_at: "2026-07-01T00:00:00.000Z",
      mem_key: "ck-child.mem",
      mem_sha256: "bb",
      cpu_cores: 2,
      memory_mb: 1024,
      machine: "kvm+nested",
    });
    const elsewhere = checkpointRow(team.id, sb2.id, { state: "FAILED", error: "disk full" });
    const foreign = checkpointRow(other.id, theirs.id);
    for (const c of [root, child, elsewhere, foreign]) await s.insertCheckpoint(c);

    expect(await s.getCheckpoint(child.id)).toEqual(child);
    expect(await s.getCheckpoint(child.id, team.id)).toEqual(child);
    expect(await s.getCheckpoint(child.id, other.id)).toBeUndefined();
    expect(await s.getCheckpoint("ck-missing")).toBeUndefined();

    const idsOf = async (f: Parameters<typeof s.listCheckpoints>[0]) => (await s.listCheckpoints(f)).map((c) => c.id);
    expect(await idsOf({})).toEqual([root.id, child.id, elsewhere.id, foreign.id]);
    expect(await idsOf({ teamId: team.id })).toEqual([root.id, child.id, elsewhere.id]);
    expect(await idsOf({ sandboxId: sb.id })).toEqual([root.id, child.id]);
    expect(await idsOf({ teamId: other.id, sandboxId: sb.id })).toEqual([]);
    expect(await idsOf({ states: ["PENDING", "FAILED"] })).toEqual([child.id, elsewhere.id, foreign.id]);
    expect(await idsOf({ teamId: team.id, states: ["DURABLE"] })).toEqual([root.id]);
    expect((await s.listCheckpoints({ sandboxId: sb.id }))[1]).toEqual(child);
  });

  it("moves a checkpoint's state only from the given states and deletes its row", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id, { status: "RUNNING" });
    const c = checkpointRow(team.id, sb.id);
    await s.insertCheckpoint(c);

    expect(await s.updateCheckpoint(c.id, { state: "FROZEN", blob_key: "ck.qcow2" }, ["PENDING"])).toBe(true);
    const frozen = await s.getCheckpoint(c.id);
    expect(frozen).toMatchObject({ state: "FROZEN", blob_key: "ck.qcow2" });
    expect(frozen && frozen.updated_at > LONG_AGO).toBe(true);
    // The upload finishing after a delete began must not resurrect the checkpoint.
    expect(await s.updateCheckpoint(c.id, { state: "DELETING" }, ["PENDING", "FROZEN", "DURABLE", "FAILED"])).toBe(true);
    expect(await s.updateCheckpoint(c.id, { state: "DURABLE", sha256: "cc", stored_bytes: 10 }, ["FROZEN"])).toBe(false);
    expect(await s.getCheckpoint(c.id)).toMatchObject({ state: "DELETING", sha256: null, stored_bytes: 0 });
    // Without `from` a patch always applies (an unknown id: nothing to apply).
    expect(await s.updateCheckpoint(c.id, { error: "gone" })).toBe(true);
    expect(await s.updateCheckpoint("ck-missing", { error: "x" })).toBe(false);

    await s.deleteCheckpointRow(c.id);
    expect(await s.getCheckpoint(c.id)).toBeUndefined();
    expect(await s.listCheckpoints({})).toEqual([]);
    await s.deleteCheckpointRow(c.id);
    await s.deleteCheckpointRow("ck-missing");
  });

  it("names the head checkpoints of live sandboxes as in use, once each", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    expect(await s.checkpointsInUse()).toEqual([]);
    for (const status of ["PENDING", "PROVISIONING", "RUNNING", "PAUSED", "TERMINATED", "ERROR", "TIMEOUT"] as const) {
      const sb = await addSandbox(s, team.id, { status });
      await s.updateSandbox(sb.id, { source_checkpoint_id: `src-${status}`, head_checkpoint_id: `head-${status}` });
    }
    // Two forks of one checkpoint share a head until one checkpoints again.
    const fork = await addSandbox(s, team.id, { status: "RUNNING" });
    await s.updateSandbox(fork.id, { head_checkpoint_id: "head-RUNNING" });
    await addSandbox(s, team.id, { status: "RUNNING" });
    expect((await s.checkpointsInUse()).sort()).toEqual(
      ["head-PENDING", "head-PROVISIONING", "head-RUNNING", "head-PAUSED"].sort(),
    );
    expect(await s.getSandbox(fork.id)).toMatchObject({ head_checkpoint_id: "head-RUNNING", source_checkpoint_id: null });
  });
}
