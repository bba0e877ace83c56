import { describe, expect, it } from "vitest";
import { cli, recorded } from "./stub-cli.js";

const amounts = {
  vcpu_seconds: 7200,
  memory_gib_seconds: 1800,
  disk_gib_seconds: 3600,
  checkpoint_gib_hours: 0.5,
  cost_usd: 0.04645,
};
const report = {
  from: "2026-12-01T00:00:00.000Z",
  to: "2026-12-03T00:00:00.000Z",
  group_by: "sandbox",
  currency: "USD",
  lines: [{ key: "sb-abc", ...amounts }],
  total: amounts,
};

describe("sandtree usage", () => {
  it("passes --from, --to, --by and --label-key to the API and prints a table with a total", async () => {
    const calls: unknown[] = [];
    const usage = {
      get: async (q: unknown) => recorded(calls, q, report),
    };
    const r = await cli(["usage", "--from", "2026-12-01", "--to", "2026-12-03T00:00:00Z", "--by", "sandbox"], { usage });
    expect(r.code).toBe(0);
    expect(calls).toEqual([{ group_by: "sandbox", from: "2026-12-01T00:00:00.000Z", to: "2026-12-03T00:00:00.000Z" }]);
    const lines = r.out.trim().split("\n");
    expect(lines[0]).toBe("usage 2026-12-01T00:00:00.000Z to 2026-12-03T00:00:00.000Z (USD)");
    expect(lines[1]).toMatch(
      /^SANDBOX +VCPU_SECONDS +MEMORY_GIB_SECONDS +DISK_GIB_SECONDS +CHECKPOINT_GIB_HOURS +VOLUME_GIB_HOURS +COST_USD$/,
    );
    expect(lines[2]).toMatch(/^sb-abc +7200 +1800 +3600 +0\.500 +0 +0\.046450$/);
    expect(lines[3]).toMatch(/^TOTAL +7200 .* 0\.046450$/);
    await cli(["usage", "--by", "label", "--label-key", "project"], { usage });
    expect(calls[1]).toEqual({ group_by: "label", label_key: "project" });
  });

  it("-o json prints the report, -o csv the server's CSV", async () => {
    const usage = { get: async () => report, csv: async () => "key,cost_usd\nsb-abc,0.04645\n" };
    expect(JSON.parse((await cli(["usage", "-o", "json"], { usage })).out)).toEqual(report);
    expect((await cli(["usage", "-o", "csv"], { usage })).out).toBe("key,cost_usd\nsb-abc,0.04645\n");
  });

  it("rejects a bad time or grouping as a usage error (exit 2)", async () => {
    const usage = { get: async () => report };
    const bad = await cli(["usage", "--from", "yesterday"], { usage });
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--from takes a date/);
    expect((await cli(["usage", "--by", "week"], { usage })).code).toBe(2);
  });
});

describe("sandtree team budget", () => {
  const view = (usd: number | null) => ({
    team: "ml",
    monthly_budget_usd: usd,
    month_to_date_usd: 1.5,
    month_start: "2026-12-01T00:00:00.000Z",
  });

  it("shows the budget, sets it with --usd and removes it with --none", async () => {
    const calls: unknown[] = [];
    const teams = {
      getBudget: async (_name: string) => view(10),
      setBudget: async (name: string, usd: number | null) => recorded(calls, [name, usd], view(usd)),
    };
    const shown = await cli(["team", "budget", "ml"], { teams });
    expect(shown.out).toContain("monthly budget: $10");
    expect(shown.out).toContain("month to date:  $1.500000 (since 2026-12-01)");
    expect((await cli(["team", "budget", "ml", "--usd", "25"], { teams })).out).toContain("$25");
    expect((await cli(["team", "budget", "ml", "--none"], { teams })).out).toContain("monthly budget: none");
    expect(calls).toEqual([
      ["ml", 25],
      ["ml", null],
    ]);
    expect((await cli(["team", "budget", "ml", "--usd", "-3"], { teams })).code).toBe(2);
    expect((await cli(["team", "budget", "ml", "--usd", "3", "--none"], { teams })).code).toBe(2);
  });
});
