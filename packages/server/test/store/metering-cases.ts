import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import { expect, it } from "vitest";
import type { MeterRecord, SandboxPatch } from "../../src/store/rows.js";
import { addSandbox, checkpointRow, iso, NOW, type StoreContext } from "./fixtures.js";

const H = 3_600_000;
const GiB = 1024 ** 3;
type Unnumbered = Omit<MeterRecord, "id">;
/** Records in a stable order (the store promises none). */
const sorted = <R extends Unnumbered>(rs: readonly R[]): R[] =>
  [...rs].sort((a, b) => a.start_ms - b.start_ms || a.kind.localeCompare(b.kind) || a.subject_id.localeCompare(b.subject_id));
const strip = ({ id: _id, ...r }: MeterRecord): Unnumbered => r;

/** Meter records written with status and state changes, their queries, budgets and the counts metrics read. */
export function meteringCases(ctx: StoreContext): void {
  it("opens a sandbox's meter span when it turns RUNNING or PAUSED and closes it at the next change", async () => {
    const s = ctx.store;
    let t = NOW;
    await s.setMeterClock(() => t);
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id, { cpu_cores: 2, memory_gb: 1.5, disk_size_gb: 10 });
    const records = async () => sorted(await s.meterRecordsOf("sandbox", [sb.id])).map(strip);
    const span = (state: SandboxStatus, start: number, end: number | null) => ({
      kind: "sandbox",
      subject_id: sb.id,
      sandbox_id: sb.id,
      team_id: team.id,
      state,
      vcpus: state === "RUNNING" ? 2 : 0,
      memory_gib: state === "RUNNING" ? 1.5 : 0,
      disk_gib: 10,
      stored_bytes: 0,
      start_ms: start,
      end_ms: end,
    });
    await s.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"]);
    expect(await records()).toEqual([]);
    t = NOW + 1_000;
    await s.updateSandbox(sb.id, { status: "RUNNING", started_at: iso(t) }, ["PROVISIONING"]);
    expect(await records()).toEqual([span("RUNNING", NOW + 1_000, null)]);
    // Neither another field, nor the same status again, nor a refused change touches the span.
    t = NOW + 2_000;
    await s.updateSandbox(sb.id, { labels: { x: "y" } });
    await s.updateSandbox(sb.id, { status: "RUNNING" }, ["RUNNING"]);
    expect(await s.updateSandbox(sb.id, { status: "ERROR" }, ["PROVISIONING"])).toBe(false);
    expect(await records()).toEqual([span("RUNNING", NOW + 1_000, null)]);
    t = NOW + H;
    await s.updateSandbox(sb.id, { status: "PAUSED" }, ["RUNNING"]);
    t = NOW + 2 * H;
    await s.updateSandbox(sb.id, { status: "RUNNING" }, ["PAUSED"]);
    expect(await records()).toEqual([
      span("RUNNING", NOW + 1_000, NOW + H),
      span("PAUSED", NOW + H, NOW + 2 * H),
      span("RUNNING", NOW + 2 * H, null),
    ]);
    t = NOW + 3 * H;
    await s.updateSandbox(sb.id, { status: "TERMINATED", terminated_at: iso(t) }, ["RUNNING", "PAUSED"]);
    expect((await records()).at(-1)).toEqual(span("RUNNING", NOW + 2 * H, NOW + 3 * H));
    expect((await records()).filter((r) => r.end_ms === null)).toEqual([]);
    expect(await s.meterRecordsOf("checkpoint", [sb.id])).toEqual([]);
    expect(await s.meterRecordsOf("sandbox", [])).toEqual([]);
  });

  it("bills a DURABLE checkpoint per stored size from when it turned DURABLE, with one upload charge", async () => {
    const s = ctx.store;
    let t = NOW;
    await s.setMeterClock(() => t);
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id, { status: "RUNNING" });
    const c = checkpointRow(team.id, sb.id);
    const other = checkpointRow(team.id, sb.id, { state: "DURABLE", stored_bytes: 5 * GiB });
    await s.insertCheckpoint(c);
    await s.insertCheckpoint(other);
    await s.updateCheckpoint(c.id, { state: "FROZEN", blob_key: "ck.qcow2" }, ["PENDING"]);
    const records = async () => sorted(await s.meterRecordsOf("checkpoint", [c.id])).map(strip);
    expect(await records()).toEqual([]);
    const rec = (kind: "checkpoint" | "upload", bytes: number, start: number, end: number | null) => ({
      kind,
      subject_id: c.id,
      sandbox_id: sb.id,
      team_id: team.id,
      state: "DURABLE",
      vcpus: 0,
      memory_gib: 0,
      disk_gib: bytes / GiB,
      stored_bytes: bytes,
      start_ms: start,
      end_ms: end,
    });
    t = NOW + H;
    await s.updateCheckpoint(c.id, { state: "DURABLE", stored_bytes: 2 * GiB, sha256: "aa" }, ["FROZEN"]);
    expect(await records()).toEqual([rec("checkpoint", 2 * GiB, NOW + H, null), rec("upload", 2 * GiB, NOW + H, NOW + H)]);
    // Every DURABLE checkpoint counts, metered or not.
    expect(await s.durableCheckpointBytes()).toBe(7 * GiB);
    t = NOW + 2 * H;
    await s.updateCheckpoint(c.id, { error: "note" });
    await s.updateCheckpoint(c.id, { stored_bytes: 2 * GiB });
    expect(await records()).toHaveLength(2);
    // A new size (a flatten) closes the span and opens one at the new size; no second upload.
    t = NOW + 3 * H;
    await s.updateCheckpoint(c.id, { stored_bytes: 3 * GiB });
    expect(await s.durableCheckpointBytes()).toBe(8 * GiB);
    t = NOW + 4 * H;
    await s.updateCheckpoint(c.id, { state: "DELETING" }, ["DURABLE"]);
    expect(await s.durableCheckpointBytes()).toBe(5 * GiB);
    t = NOW + 5 * H;
    await s.deleteCheckpointRow(c.id);
    expect(await records()).toEqual([
      rec("checkpoint", 2 * GiB, NOW + H, NOW + 3 * H),
      rec("upload", 2 * GiB, NOW + H, NOW + H),
      rec("checkpoint", 3 * GiB, NOW + 3 * H, NOW + 4 * H),
    ]);
    expect(await s.meterRecordsOf("sandbox", [sb.id])).toEqual([]);
    // A row inserted DURABLE was never metered: only changes are.
    expect(await s.meterRecordsOf("checkpoint", [other.id])).toEqual([]);
  });

  it("answers the records overlapping a window, per team, with the sandbox's labels when asked", async () => {
    const s = ctx.store;
    const a = await s.createTeam("alpha");
    const b = await s.createTeam("beta");
    const sa = await addSandbox(s, a.id, { labels: { project: "x" } });
    const sbb = await addSandbox(s, b.id, { labels: {} });
    const base = { vcpus: 1, memory_gib: 0.5, disk_gib: 4, stored_bytes: 0 };
    const ofA = { ...base, sandbox_id: sa.id, team_id: a.id };
    const r1 = { ...ofA, kind: "sandbox", subject_id: sa.id, state: "RUNNING", start_ms: NOW, end_ms: NOW + H } as const;
    const r2 = { ...ofA, kind: "sandbox", subject_id: sa.id, state: "RUNNING", start_ms: NOW + 2 * H, end_ms: null } as const;
    const r3 = { ...ofA, kind: "upload", subject_id: "ck-1", state: "DURABLE", start_ms: NOW + H, end_ms: NOW + H } as const;
    const ofB = { ...base, team_id: b.id, state: "PAUSED", start_ms: NOW, end_ms: NOW + 3 * H } as const;
    const r4 = { ...ofB, kind: "sandbox", subject_id: sbb.id, sandbox_id: sbb.id } as const;
    const r5 = { ...ofB, kind: "sandbox", subject_id: "sb-gone", sandbox_id: "sb-gone" } as const;
    await s.insertMeterRecords([r1, r2, r3, r4, r5]);
    const window = async (fromMs: number, toMs: number, teamId?: string) =>
      sorted(
        (await s.listMeterRecords({ fromMs, toMs, ...(teamId === undefined ? {} : { teamId }) })).map(({ labels: _l, ...r }) =>
          strip(r),
        ),
      );
    expect(await window(NOW, NOW + H)).toEqual(sorted([r1, r4, r5]));
    // A span ending where the window starts is outside it; an upload at its start is inside.
    expect(await window(NOW + H, NOW + 2 * H)).toEqual(sorted([r3, r4, r5]));
    expect(await window(NOW + 2 * H, NOW + 10 * H)).toEqual(sorted([r2, r4, r5]));
    expect(await window(NOW, NOW + 10 * H, a.id)).toEqual(sorted([r1, r2, r3]));
    expect(await window(NOW - 2 * H, NOW)).toEqual([]);

    const all = await s.listMeterRecords({ fromMs: NOW, toMs: NOW + 10 * H });
    expect(new Set(all.map((r) => r.id)).size).toBe(5);
    for (const r of all) expect(r.labels).toBeNull();
    const labelled = await s.listMeterRecords({ fromMs: NOW, toMs: NOW + 10 * H, withLabels: true });
    const labelsOf = (id: string) =>
      labelled.filter((r) => r.subject_id === id).map((r) => (r.labels === null ? null : JSON.parse(r.labels)));
    expect(labelsOf(sa.id)).toEqual([{ project: "x" }, { project: "x" }]);
    expect(labelsOf("ck-1")).toEqual([{ project: "x" }]);
    expect(labelsOf(sbb.id)).toEqual([{}]);
    expect(labelsOf("sb-gone")).toEqual([null]);
    expect(sorted((await s.meterRecordsOf("sandbox", [sa.id, "sb-gone"])).map(strip))).toEqual(sorted([r1, r2, r5]));
    expect(sorted((await s.meterRecordsOf("checkpoint", ["ck-1"])).map(strip))).toEqual([r3]);
  });

  it("keeps team budgets, counts creations in a window, running sandboxes and sandboxes per status", async () => {
    const s = ctx.store;
    const a = await s.createTeam("alpha");
    const b = await s.createTeam("beta");
    expect(await s.getTeamBudget(a.id)).toBeNull();
    await s.setTeamBudget(a.id, 12.5);
    await s.setTeamBudget(a.id, 20);
    expect(await s.getTeamBudget(a.id)).toBe(20);
    expect(await s.getTeamBudget(b.id)).toBeNull();
    await s.setTeamBudget(a.id, null);
    expect(await s.getTeamBudget(a.id)).toBeNull();

    const made: Sandbox[] = [];
    const add = async (teamId: string, status: SandboxStatus, at: number) =>
      void made.push(await addSandbox(s, teamId, { status, created_at: iso(at) }));
    await add(a.id, "RUNNING", NOW - H);
    await add(a.id, "RUNNING", NOW);
    await add(a.id, "PAUSED", NOW + H - 1);
    await add(a.id, "TERMINATED", NOW + H);
    await add(b.id, "RUNNING", NOW + 30 * 60_000);
    await add(b.id, "ERROR", NOW + 2 * H);

    const between = async (q: { teamId?: string; fromIso: string; toIso: string }) =>
      (await s.creationsBetween(q)).map((c) => `${c.created_at} ${c.status}`).sort();
    expect(await between({ fromIso: iso(NOW), toIso: iso(NOW + H) })).toEqual(
      [`${iso(NOW)} RUNNING`, `${iso(NOW + 30 * 60_000)} RUNNING`, `${iso(NOW + H - 1)} PAUSED`].sort(),
    );
    expect(await between({ teamId: a.id, fromIso: iso(NOW), toIso: iso(NOW + H) })).toEqual(
      [`${iso(NOW)} RUNNING`, `${iso(NOW + H - 1)} PAUSED`].sort(),
    );
    expect(await between({ teamId: b.id, fromIso: iso(NOW - 10 * H), toIso: iso(NOW + 10 * H) })).toHaveLength(2);

    expect(await s.countRunning()).toBe(3);
    expect(await s.countRunning(a.id)).toBe(2);
    expect(await s.countRunning(b.id)).toBe(1);
    const counts = await s.countByStatus();
    const expected: Partial<Record<SandboxStatus, number>> = { RUNNING: 3, PAUSED: 1, TERMINATED: 1, ERROR: 1 };
    for (const st of ["PENDING", "PROVISIONING", "RUNNING", "PAUSED", "TERMINATED", "ERROR", "TIMEOUT"] as const) {
      expect(counts[st] ?? 0).toBe(expected[st] ?? 0);
    }
    expect(made).toHaveLength(6);
  });

  it("tells status listeners of each committed status change, after the change is visible", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const sb = await addSandbox(s, team.id);
    const heard: Array<{ id: string; patch: SandboxPatch; seen: unknown }> = [];
    await s.onSandboxStatus(() => {
      throw new Error("a failing listener does not undo the change or silence the others");
    });
    await s.onSandboxStatus((id, patch) => void heard.push({ id, patch, seen: s.getSandbox(id) }));
    const started = { status: "RUNNING", started_at: iso(NOW) } as const;
    expect(await s.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"])).toBe(true);
    expect(await s.updateSandbox(sb.id, started, ["PROVISIONING"])).toBe(true);
    expect(await s.updateSandbox(sb.id, { status: "PAUSED" }, ["PENDING"])).toBe(false);
    expect(await s.updateSandbox(sb.id, { name: "renamed" })).toBe(true);
    expect(heard.map((h) => [h.id, h.patch])).toEqual([
      [sb.id, { status: "PROVISIONING" }],
      [sb.id, started],
    ]);
    expect(await heard[0]?.seen).toMatchObject({ status: "PROVISIONING" });
    expect(await heard[1]?.seen).toMatchObject(started);
    expect(await s.getSandbox(sb.id)).toMatchObject({ ...started, name: "renamed" });
  });
}
