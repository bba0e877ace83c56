import { type SandboxStatus, SandtreeError, type TeamUsage } from "@sandtree/protocol";
import { expect, it } from "vitest";
import type { SandboxAdmission } from "../../src/store/rows.js";
import { addSandbox, attempt, iso, NOW, type StoreContext, sandboxRow, twoTeams } from "./fixtures.js";

const H = 3_600_000;
/** An idempotency key made at NOW counts from this instant (NOW minus the service's 24 h). */
const NOT_BEFORE = iso(NOW - 24 * H);

function admission(over: Partial<SandboxAdmission> & Pick<SandboxAdmission, "sandbox">): SandboxAdmission {
  return { sealedSecrets: null, idempotency: null, nowMs: NOW, check: () => {}, ...over };
}

/** Usage, quota checks inside the insert, idempotency keys and sealed secrets. */
export function admissionCases(ctx: StoreContext): void {
  it("counts a team's active sandboxes, their resources and its recent creations", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const empty: TeamUsage = {
      active_sandboxes: 0,
      vcpus: 0,
      memory_gb: 0,
      storage_gb: 0,
      creations_last_hour: 0,
      creations_last_10s: 0,
    };
    expect(await s.teamUsage(team.id, NOW)).toEqual(empty);
    // [status, vCPUs, memory GiB, disk GiB, created this long ago]. Paused and ended sandboxes
    // hold no quota, but their creations still count.
    const rows: Array<[SandboxStatus, number, number, number, number]> = [
      ["RUNNING", 2, 1.5, 10, 2 * H],
      ["PROVISIONING", 1, 0.5, 4, 30 * 60_000],
      ["PENDING", 4, 2, 8, 5_000],
      ["PAUSED", 8, 8, 8, 20 * 60_000],
      ["TERMINATED", 8, 8, 8, 2_000],
    ];
    for (const [status, cpu_cores, memory_gb, disk_size_gb, ago] of rows) {
      await addSandbox(s, team.id, { status, cpu_cores, memory_gb, disk_size_gb, created_at: iso(NOW - ago) });
    }
    await addSandbox(s, other.id, { status: "RUNNING", cpu_cores: 16, created_at: iso(NOW - 1_000) });
    expect(await s.teamUsage(team.id, NOW)).toEqual({
      active_sandboxes: 3,
      vcpus: 7,
      memory_gb: 4,
      storage_gb: 22,
      creations_last_hour: 4,
      creations_last_10s: 2,
    });
    // The n-th (0-based, oldest first) creation after a time: when a rate limit frees up.
    const since = iso(NOW - H);
    expect(await s.nthCreationSince(team.id, since, 0)).toBe(iso(NOW - 30 * 60_000));
    expect(await s.nthCreationSince(team.id, since, 1)).toBe(iso(NOW - 20 * 60_000));
    expect(await s.nthCreationSince(team.id, since, 3)).toBe(iso(NOW - 2_000));
    expect(await s.nthCreationSince(team.id, since, 4)).toBeUndefined();
    expect(await s.nthCreationSince(other.id, since, 0)).toBe(iso(NOW - 1_000));
  });

  it("admits a sandbox with its masked secrets, sealed secrets apart, after checking the usage", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    await addSandbox(s, team.id, { status: "RUNNING", cpu_cores: 2, memory_gb: 1, disk_size_gb: 4 });
    const seen: TeamUsage[] = [];
    const lifetime = { timeout_minutes: 60, idle_timeout_minutes: null, expires_at: iso(NOW + H), last_activity_at: iso(NOW) };
    const sb = sandboxRow(team.id, { secrets: { TOKEN: "***" }, labels: { env: "test" }, ...lifetime });
    const r = await s.admitSandbox(admission({ sandbox: sb, sealedSecrets: "sealed-blob", check: (u) => void seen.push(u) }));
    expect(r.created).toBe(true);
    expect(r.sandbox).toMatchObject({ ...sb, secrets: { TOKEN: "***" } });
    expect(seen).toEqual([expect.objectContaining({ active_sandboxes: 1, vcpus: 2, memory_gb: 1, storage_gb: 4 })]);
    expect(await s.getSandbox(sb.id)).toEqual(r.sandbox);
    expect(await s.getSealedSecrets(sb.id)).toBe("sealed-blob");

    const plain = sandboxRow(team.id);
    const r2 = await s.admitSandbox(admission({ sandbox: plain }));
    expect(r2.sandbox).toMatchObject({ id: plain.id, secrets: {} });
    expect(await s.getSealedSecrets(plain.id)).toBeUndefined();
    expect((await s.teamUsage(team.id, NOW)).active_sandboxes).toBe(3);
  });

  it("refuses a create when the check throws, storing nothing, so concurrent creates never overshoot", async () => {
    const s = ctx.store;
    const team = await s.createTeam("alpha");
    const max = 2;
    const check = (u: TeamUsage) => {
      if (u.active_sandboxes + 1 > max) throw new SandtreeError("QUOTA_SANDBOXES", "team quota exceeded");
    };
    const rows = Array.from({ length: 5 }, () => sandboxRow(team.id));
    const results = await Promise.allSettled(
      rows.map((sandbox, i) =>
        attempt(() =>
          s.admitSandbox(
            admission({
              sandbox,
              check,
              sealedSecrets: `sealed-${i}`,
              idempotency: { key: `k${i}`, requestMac: "m", notBeforeIso: NOT_BEFORE },
            }),
          ),
        ),
      ),
    );
    const admitted = results.filter((r) => r.status === "fulfilled");
    const refused = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
    expect(admitted).toHaveLength(max);
    expect(refused).toHaveLength(3);
    for (const e of refused) expect(e).toMatchObject({ code: "QUOTA_SANDBOXES" });
    expect((await s.teamUsage(team.id, NOW)).active_sandboxes).toBe(max);
    const listed = await s.listSandboxes(team.id, { limit: 10 });
    expect(listed.sandboxes).toHaveLength(max);
    // A refused create leaves no secrets and no idempotency key behind.
    for (const [i, sb] of rows.entries()) {
      if (listed.sandboxes.some((x) => x.id === sb.id)) continue;
      expect(await s.getSandbox(sb.id)).toBeUndefined();
      expect(await s.getSealedSecrets(sb.id)).toBeUndefined();
      expect(await s.findIdempotent(team.id, `k${i}`, NOT_BEFORE)).toBeUndefined();
    }
  });

  it("replays an unexpired idempotency key with the first request's MAC, per team", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const key = (mac: string, notBeforeIso = NOT_BEFORE) => ({ key: "create-1", requestMac: mac, notBeforeIso });
    const first = sandboxRow(team.id, { created_at: iso(NOW - H) });
    const r1 = await s.admitSandbox(admission({ sandbox: first, idempotency: key("mac-1") }));
    expect(r1.created).toBe(true);
    expect(await s.findIdempotent(team.id, "create-1", NOT_BEFORE)).toEqual({ sandbox: r1.sandbox, requestMac: "mac-1" });

    let checked = 0;
    const second = sandboxRow(team.id);
    const r2 = await s.admitSandbox(admission({ sandbox: second, idempotency: key("mac-2"), check: () => void checked++ }));
    expect(r2).toEqual({ created: false, sandbox: r1.sandbox, requestMac: "mac-1" });
    expect(checked).toBe(0);
    expect(await s.getSandbox(second.id)).toBeUndefined();

    // Keys are per team.
    expect(await s.findIdempotent(other.id, "create-1", NOT_BEFORE)).toBeUndefined();
    const theirs = sandboxRow(other.id);
    expect((await s.admitSandbox(admission({ sandbox: theirs, idempotency: key("mac-3") }))).created).toBe(true);

    // Past its window the key no longer answers, and a new create takes it over.
    const later = iso(NOW - H + 1);
    expect(await s.findIdempotent(team.id, "create-1", later)).toBeUndefined();
    const third = sandboxRow(team.id);
    const r3 = await s.admitSandbox(admission({ sandbox: third, idempotency: key("mac-4", later) }));
    expect(r3.created).toBe(true);
    expect(await s.findIdempotent(team.id, "create-1", later)).toEqual({ sandbox: r3.sandbox, requestMac: "mac-4" });
  });
}
