// The SDK's usage, stats and budget calls against the real server (no VMs: meter records are
// seeded through the server's store, and a budget of $0 refuses before any VM starts).
import path from "node:path";
import { BudgetExceededError, NotFoundError, PermissionError, SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, SqliteStore } from "../src/index.js";
import { startTestServer, type TestServer } from "./helpers.js";

const T0 = Date.UTC(2026, 9, 10, 12); // 2026-10-10 12:00 UTC
const H = 3_600_000;
let t: TestServer;
let admin: SandtreeClient;
const clock = new ManualClock(T0 + 2 * H);
let teamId = "";
let otherTeamId = "";

beforeAll(async () => {
  t = await startTestServer({ clock });
  admin = new SandtreeClient({ apiUrl: t.url, apiKey: t.key, retry: { maxAttempts: 1 } });
  teamId = (await admin.teams.list()).find((x) => x.name === "default")?.id ?? "";
  otherTeamId = (await admin.teams.create("usage-other")).id;
  const base = { kind: "sandbox" as const, state: "RUNNING", stored_bytes: 0, end_ms: T0 + H };
  // Seeded through a second connection to the server's database, as bench/usage.mjs does.
  const store = new SqliteStore(path.join(t.dataDir, "sandtree.db"));
  await store.insertMeterRecords([
    { ...base, subject_id: "sb-a", sandbox_id: "sb-a", team_id: teamId, vcpus: 1, memory_gib: 1, disk_gib: 10, start_ms: T0 },
    { ...base, subject_id: "sb-b", sandbox_id: "sb-b", team_id: otherTeamId, vcpus: 4, memory_gib: 8, disk_gib: 1, start_ms: T0 },
  ]);
  await store.close();
});
afterAll(async () => {
  await t?.close();
});

// One hour of 1 vCPU, 1 GiB, 10 GiB of disk at the default prices.
const COST_A = 0.02 + 0.0125 + 10 * 0.0002;
const COST_B = 4 * 0.02 + 8 * 0.0125 + 0.0002;

describe("client.usage and budgets", () => {
  it("an admin key sees every team; a team key only its own", async () => {
    const q = { from: new Date(T0 - H).toISOString(), to: new Date(T0 + 2 * H).toISOString(), group_by: "team" as const };
    const all = await admin.usage.get(q);
    expect(all.lines.map((l) => l.key).sort()).toEqual([teamId, otherTeamId].sort());
    expect(all.total.cost_usd).toBeCloseTo(COST_A + COST_B, 12);
    const key = await admin.keys.create("usage-other");
    const member = new SandtreeClient({ apiUrl: t.url, apiKey: key.key, retry: { maxAttempts: 1 } });
    const own = await member.usage.get({ ...q, group_by: "sandbox" });
    expect(own.lines.map((l) => l.key)).toEqual(["sb-b"]);
    expect(own.total.vcpu_seconds).toBe(4 * 3600);
    expect(own.total.cost_usd).toBeCloseTo(COST_B, 12);
    const csv = await member.usage.csv({ ...q, group_by: "sandbox" });
    expect(csv.split("\n")[1]).toBe(`sb-b,14400,28800,3600,0,${own.total.cost_usd},0`);
    const stats = await member.usage.stats({ window_hours: 3, bucket_minutes: 60 });
    // Buckets from T0-1h: the record runs T0 to T0+1h.
    expect(stats.series.map((b) => b.running)).toEqual([0, 1, 0]);
    expect(stats.estimated_cost_usd).toBeCloseTo(COST_B, 12);
    // Budgets: a team reads its own, only an admin sets one, other teams' answer as missing.
    expect((await member.teams.getBudget("usage-other")).monthly_budget_usd).toBeNull();
    await expect(member.teams.setBudget("usage-other", 1)).rejects.toBeInstanceOf(PermissionError);
    await expect(member.teams.getBudget("default")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a spent budget makes create raise BudgetExceededError (402); null removes the budget", async () => {
    const b = await admin.teams.setBudget("default", 0.01);
    expect(b).toMatchObject({ team: "default", monthly_budget_usd: 0.01, month_start: "2026-10-01T00:00:00.000Z" });
    expect(b.month_to_date_usd).toBeCloseTo(COST_A, 12);
    const err = await admin.sandboxes.create({ image: "sandtree/busybox" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetExceededError);
    expect((err as BudgetExceededError).status).toBe(402);
    expect((err as BudgetExceededError).code).toBe("BUDGET_EXCEEDED");
    expect((err as BudgetExceededError).details).toMatchObject({ monthly_budget_usd: 0.01 });
    // Another team's budget is its own.
    await admin.teams.setBudget("usage-other", 1000);
    expect((await admin.teams.setBudget("default", null)).monthly_budget_usd).toBeNull();
  });

  it("rejects a period that ends before it starts and an unknown grouping", async () => {
    const bad = await t.api("GET", "/v1/usage?from=2026-10-02T00:00:00Z&to=2026-10-01T00:00:00Z");
    expect(bad.status).toBe(400);
    expect(bad.body.details.field).toBe("to");
    expect((await t.api("GET", "/v1/usage?group_by=week")).body.code).toBe("VALIDATION_FAILED");
  });
});
