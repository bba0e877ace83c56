import { describe, expect, it } from "vitest";
import { cli, recorded } from "./stub-cli.js";

const key = {
  id: "key_1",
  team_id: "team_1",
  team: "ml",
  prefix: "st_abcd",
  admin: false,
  created_at: new Date().toISOString(),
  revoked_at: null,
};

describe("team and key commands", () => {
  it("team create / list", async () => {
    const calls: unknown[] = [];
    const teams = {
      create: async (name: string) => recorded(calls, name, { id: "team_1", name, created_at: new Date().toISOString() }),
      list: async () => [{ id: "team_1", name: "ml", created_at: new Date().toISOString() }],
    };
    expect((await cli(["team", "create", "ml"], { teams })).out).toBe("ml team_1\n");
    expect(calls).toEqual(["ml"]);
    const list = await cli(["team", "list"], { teams });
    expect(list.out).toMatch(/^NAME +ID +AGE\nml +team_1 +\d+s\n$/);
  });

  it("key create prints the key once; --admin is passed; list shows prefixes; revoke", async () => {
    const calls: unknown[] = [];
    const keys = {
      create: async (team: string, o: unknown) => recorded(calls, [team, o], { ...key, admin: true, key: "st_secret" }),
      list: async () => [key],
      revoke: async (id: string) => ({ ...key, id, revoked_at: new Date().toISOString() }),
    };
    const created = await cli(["key", "create", "--team", "ml", "--admin"], { keys });
    expect(calls).toEqual([["ml", { admin: true }]]);
    expect(created.out).toContain("key:   st_secret");
    expect(created.err).toMatch(/not shown again/);
    const list = await cli(["key", "list"], { keys });
    expect(list.out).toContain("st_abcd...");
    expect(list.out).not.toContain("st_secret");
    expect((await cli(["key", "revoke", "key_9"], { keys })).out).toBe("key_9\n");
    expect((await cli(["key", "create"], { keys })).code).toBe(2);
  });

  it("team limits shows usage and --set changes limits (default restores)", async () => {
    const calls: unknown[] = [];
    const r = {
      team: "ml",
      limits: {
        max_active_sandboxes: 2,
        max_vcpus: 4096,
        max_memory_gb: 4096,
        max_storage_gb: 32768,
        max_creations_per_hour: 102400,
        max_creations_per_10s: 192,
        max_volumes: 100,
        max_volume_gb: 10240,
      },
      usage: { active_sandboxes: 1, vcpus: 1, memory_gb: 0.5, storage_gb: 4, creations_last_hour: 3, creations_last_10s: 0 },
    };
    const teams = {
      getLimits: async () => r,
      setLimits: async (name: string, l: unknown) => recorded(calls, [name, l], r),
    };
    const shown = await cli(["team", "limits", "ml"], { teams });
    expect(shown.out).toMatch(/max_active_sandboxes +1 +2\n/);
    await cli(["team", "limits", "ml", "--set", "max_vcpus=8", "--set", "max_active_sandboxes=default"], { teams });
    expect(calls).toEqual([["ml", { max_vcpus: 8, max_active_sandboxes: null }]]);
    expect((await cli(["team", "limits", "ml", "--set", "bogus=1"], { teams })).code).toBe(2);
  });
});
