import { DEFAULT_TEAM_LIMITS, SandtreeError, type TeamUsage } from "@sandtree/protocol";
import { expect, it } from "vitest";
import type { SandboxAdmission } from "../../src/store/rows.js";
import type { Store } from "../../src/store/store.js";
import { addSandbox, attempt, iso, NOW, networkRow, type OpenedStore, type StoreContext, sandboxRow } from "./fixtures.js";

const NOT_BEFORE = iso(NOW - 24 * 3_600_000);

function admission(over: Partial<SandboxAdmission> & Pick<SandboxAdmission, "sandbox">): SandboxAdmission {
  return { sealedSecrets: null, idempotency: null, nowMs: NOW, check: () => {}, ...over };
}

/** Opens `1 + peers` stores on fresh, shared data, runs `fn`, and removes them whatever happens. */
async function withServers(ctx: StoreContext, peers: number, fn: (stores: Store[], o: OpenedStore) => Promise<void>) {
  const o = await ctx.make({ peers });
  try {
    await fn([o.store, ...o.peers], o);
  } finally {
    await o.destroy();
  }
}

/**
 * Several servers on one database: what must hold across processes, not only within one
 * (quotas, idempotency keys, network slots, conditional status changes, migrations).
 */
export function fleetCases(ctx: StoreContext): void {
  it("several stores opening one empty database together apply each migration once and share the data", async () => {
    await withServers(ctx, 2, async ([a, b, c], o) => {
      const names = await o.migrations();
      expect(names.length).toBeGreaterThan(0);
      expect(new Set(names).size).toBe(names.length);
      const team = await a?.createTeam("shared");
      expect(await b?.getTeamByName("shared")).toEqual(team);
      expect(await c?.countTeams()).toBe(1);
      // A reopened store finds every migration applied and applies none again.
      await o.reopen();
      expect(await o.migrations()).toEqual(names);
    });
  });

  it("two stores admitting one team's sandboxes at once never overshoot its quota", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a] = stores as [Store, Store];
      const team = await a.createTeam("alpha");
      const max = 3;
      const check = (u: TeamUsage) => {
        if (u.active_sandboxes + 1 > max) throw new SandtreeError("QUOTA_SANDBOXES", "team quota exceeded");
      };
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          attempt(() => (stores[i % 2] as Store).admitSandbox(admission({ sandbox: sandboxRow(team.id), check }))),
        ),
      );
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(max);
      for (const r of results) if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "QUOTA_SANDBOXES" });
      for (const s of stores) expect((await s.teamUsage(team.id, NOW)).active_sandboxes).toBe(max);
    });
  });

  it("one idempotency key sent to two stores at once creates one sandbox", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a, b] = stores as [Store, Store];
      const team = await a.createTeam("alpha");
      const rows = Array.from({ length: 8 }, () => sandboxRow(team.id));
      const results = await Promise.all(
        rows.map((sandbox, i) =>
          (stores[i % 2] as Store).admitSandbox(
            admission({ sandbox, idempotency: { key: "same", requestMac: `mac-${i}`, notBeforeIso: NOT_BEFORE } }),
          ),
        ),
      );
      const created = results.filter((r) => r.created);
      expect(created).toHaveLength(1);
      const winner = created[0]?.sandbox.id;
      for (const r of results) expect(r.sandbox.id).toBe(winner);
      expect((await b.listSandboxes(team.id, { limit: 20 })).sandboxes.map((s) => s.id)).toEqual([winner]);
    });
  });

  it("two stores allocating network slots at once never give one slot twice", async () => {
    await withServers(ctx, 1, async (stores) => {
      const ids = Array.from({ length: 8 }, (_, i) => `sb-${i}`);
      for (const id of ids) await (stores[0] as Store).putNetwork(networkRow(id));
      const slots = await Promise.all(ids.map((id, i) => (stores[i % 2] as Store).allocateNetworkSlot(id, 5)));
      expect(slots.filter((x): x is number => x !== null).sort()).toEqual([0, 1, 2, 3, 4]);
      expect(slots.filter((x) => x === null)).toHaveLength(3);
      const held = (await (stores[1] as Store).listSlottedNetworks()).map((r) => r.slot).sort();
      expect(held).toEqual([0, 1, 2, 3, 4]);
    });
  });

  it("a conditional status change raced from two stores applies once, is metered once, and is heard only where it was made", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a, b] = stores as [Store, Store];
      a.setMeterClock(() => NOW);
      b.setMeterClock(() => NOW);
      const team = await a.createTeam("alpha");
      const sb = await addSandbox(a, team.id, { status: "PROVISIONING" });
      const heard: Array<{ store: string; seenElsewhere: Promise<string | undefined> }> = [];
      // The listener runs after the commit: the other store already reads the new status.
      a.onSandboxStatus((id) =>
        heard.push({ store: "a", seenElsewhere: Promise.resolve(b.getSandbox(id)).then((s) => s?.status) }),
      );
      b.onSandboxStatus((id) =>
        heard.push({ store: "b", seenElsewhere: Promise.resolve(a.getSandbox(id)).then((s) => s?.status) }),
      );
      const applied = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          (stores[i % 2] as Store).updateSandbox(sb.id, { status: "RUNNING", started_at: iso(NOW) }, ["PROVISIONING"]),
        ),
      );
      expect(applied.filter(Boolean)).toHaveLength(1);
      expect(heard).toHaveLength(1);
      expect(heard[0]?.store).toBe(applied.indexOf(true) % 2 === 0 ? "a" : "b");
      expect(await heard[0]?.seenElsewhere).toBe("RUNNING");
      const records = await b.meterRecordsOf("sandbox", [sb.id]);
      expect(records).toMatchObject([{ state: "RUNNING", end_ms: null }]);
    });
  });
}

/**
 * Read-modify-write changes that in-process locks cannot order across servers: each is one atomic
 * store call, raced here from two stores (two servers) on one database.
 */
export function fleetLockCases(ctx: StoreContext): void {
  it("revokes raced from two stores never remove the last admin key", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a] = stores as [Store, Store];
      const team = await a.createTeam("admins");
      const keys = await Promise.all(Array.from({ length: 4 }, (_, i) => a.createApiKey(team.id, `hash-${i}`, `p${i}`, true)));
      const outcomes = await Promise.all(
        keys.flatMap((k, i) => [0, 1].map((j) => (stores[(i + j) % 2] as Store).revokeApiKeyKeepingAdmin(k.id))),
      );
      expect(outcomes.filter((o) => o === "revoked")).toHaveLength(3);
      expect(outcomes.filter((o) => o === "last_admin").length).toBeGreaterThan(0);
      expect(outcomes.every((o) => o === "revoked" || o === "last_admin" || o === "already_revoked")).toBe(true);
      expect(await a.countActiveAdminKeys()).toBe(1);
      expect(await a.revokeApiKeyKeepingAdmin("nope")).toBe("not_found");
    });
  });

  it("limit changes raced from two stores keep each other's overrides", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a, b] = stores as [Store, Store];
      const team = await a.createTeam("alpha");
      const limits = Object.keys(DEFAULT_TEAM_LIMITS);
      await Promise.all(
        limits.map((k, i) => (stores[i % 2] as Store).updateTeamLimitOverrides(team.id, (cur) => ({ ...cur, [k]: 100 + i }))),
      );
      const got = await b.getTeamLimitOverrides(team.id);
      expect(Object.keys(got).sort()).toEqual([...limits].sort());
    });
  });

  it("network policy updates raced from two stores each get their own generation", async () => {
    await withServers(ctx, 1, async (stores) => {
      const [a, b] = stores as [Store, Store];
      await a.putNetwork(networkRow("sb-net"));
      await a.putNetwork(networkRow("sb-off", { enabled: false }));
      const rows = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (stores[i % 2] as Store).updateNetworkPolicy("sb-net", {
            mode: "allowlist",
            allowlist: [`h${i}.example.com`],
            denylist: [],
            updated_at: iso(NOW),
          }),
        ),
      );
      expect(rows.map((r) => r?.generation).sort((x, y) => (x ?? 0) - (y ?? 0))).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
      const last = await b.getNetwork("sb-net");
      expect(last).toMatchObject({ generation: 9, applied: false });
      // Applying an older generation does not mark the newer one applied.
      expect(await a.setNetworkApplied("sb-net", 8, true)).toBe(false);
      expect(await b.setNetworkApplied("sb-net", 9, true)).toBe(true);
      expect((await a.getNetwork("sb-net"))?.applied).toBe(true);
      const off = await a.updateNetworkPolicy("sb-off", { mode: "deny_all", allowlist: [], denylist: [], updated_at: iso(NOW) });
      expect(off).toBeUndefined();
    });
  });
}
