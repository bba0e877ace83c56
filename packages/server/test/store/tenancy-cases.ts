import { expect, it } from "vitest";
import { attempt, type StoreContext, twoTeams } from "./fixtures.js";

/** Teams, API keys and their revocation, team limit overrides, and a restart keeping them. */
export function tenancyCases(ctx: StoreContext): void {
  it("creates teams with unique names and finds them by id and by name", async () => {
    const s = ctx.store;
    expect(await s.countTeams()).toBe(0);
    expect(await s.listTeams()).toEqual([]);
    const a = await s.createTeam("alpha");
    const b = await s.createTeam("beta");
    expect(a).toEqual({ id: expect.any(String), name: "alpha", created_at: expect.any(String) });
    expect(Number.isNaN(Date.parse(a.created_at))).toBe(false);
    expect(b.id).not.toBe(a.id);
    expect(await s.getTeam(a.id)).toEqual(a);
    expect(await s.getTeamByName("beta")).toEqual(b);
    expect(await s.getTeam("team_missing")).toBeUndefined();
    expect(await s.getTeamByName("gamma")).toBeUndefined();
    expect(await s.countTeams()).toBe(2);
    expect((await s.listTeams()).map((t) => t.name)).toEqual(["alpha", "beta"]);
    await expect(attempt(() => s.createTeam("alpha"))).rejects.toThrow();
    expect(await s.countTeams()).toBe(2);
  });

  it("stores API keys by hash, never answers the hash, and revokes a key once", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    const admin = await s.createApiKey(team.id, "hash-admin", "st_adm", true);
    const user = await s.createApiKey(other.id, "hash-user", "st_usr", false);
    expect(admin).toEqual({
      id: expect.any(String),
      team_id: team.id,
      prefix: "st_adm",
      is_admin: true,
      created_at: expect.any(String),
      revoked_at: null,
    });
    expect(user.is_admin).toBe(false);
    expect(await s.findApiKey("hash-admin")).toEqual(admin);
    expect(await s.findApiKey("hash-user")).toEqual(user);
    expect(await s.findApiKey("hash-none")).toBeUndefined();
    expect(await s.getApiKey(user.id)).toEqual(user);
    expect(await s.getApiKey("key_missing")).toBeUndefined();
    const listed = await s.listApiKeys();
    expect(listed.map((k) => k.id).sort()).toEqual([admin.id, user.id].sort());
    for (const k of [...listed, await s.findApiKey("hash-admin")]) expect(k).not.toHaveProperty("key_hash");
    // Two keys with one hash would make authentication ambiguous.
    await expect(attempt(() => s.createApiKey(team.id, "hash-user", "st_dup", false))).rejects.toThrow();

    await s.createApiKey(other.id, "hash-admin-2", "st_ad2", true);
    expect(await s.countActiveAdminKeys()).toBe(2);
    expect(await s.revokeApiKey(admin.id)).toBe(true);
    expect(await s.revokeApiKey(admin.id)).toBe(false);
    expect(await s.revokeApiKey("key_missing")).toBe(false);
    expect(await s.countActiveAdminKeys()).toBe(1);
    // A revoked key is still found (so it can be refused as revoked), with its revocation time.
    const revoked = await s.findApiKey("hash-admin");
    expect(revoked).toEqual({ ...admin, revoked_at: expect.any(String) });
    expect(await s.getApiKey(admin.id)).toEqual(revoked);
    expect(await s.getApiKey(user.id)).toEqual(user);
  });

  it("keeps only the limits set for a team, replacing them as a whole", async () => {
    const s = ctx.store;
    const { team, other } = await twoTeams(s);
    expect(await s.getTeamLimitOverrides(team.id)).toEqual({});
    await s.setTeamLimitOverrides(team.id, { max_vcpus: 8, max_memory_gb: 2.5 });
    expect(await s.getTeamLimitOverrides(team.id)).toEqual({ max_vcpus: 8, max_memory_gb: 2.5 });
    expect(await s.getTeamLimitOverrides(other.id)).toEqual({});
    // The caller merges; the store keeps what it is given.
    await s.setTeamLimitOverrides(team.id, { max_active_sandboxes: 3 });
    expect(await s.getTeamLimitOverrides(team.id)).toEqual({ max_active_sandboxes: 3 });
    await s.setTeamLimitOverrides(team.id, {});
    expect(await s.getTeamLimitOverrides(team.id)).toEqual({});
  });

  it("keeps teams, keys, limits and budgets across a restart", async () => {
    const team = await ctx.store.createTeam("alpha");
    const key = await ctx.store.createApiKey(team.id, "hash-a", "st_a", true);
    await ctx.store.setTeamLimitOverrides(team.id, { max_vcpus: 6 });
    await ctx.store.setTeamBudget(team.id, 25);
    ctx.store = await ctx.opened.reopen();
    expect(await ctx.store.getTeamByName("alpha")).toEqual(team);
    expect(await ctx.store.findApiKey("hash-a")).toEqual(key);
    expect(await ctx.store.getTeamLimitOverrides(team.id)).toEqual({ max_vcpus: 6 });
    expect(await ctx.store.getTeamBudget(team.id)).toBe(25);
  });
}
