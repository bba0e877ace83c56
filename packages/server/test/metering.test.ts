// Metering (#15): a real sandbox runs, pauses, resumes and is checkpointed while the test moves
// the metering clock (hours pass in an instant); the usage API's totals must match the price
// table to the cent (and to 1e-9), across a price change, in every grouping, in CSV and in the
// sandbox's and checkpoint's own cost_usd. A spent budget then refuses a create with 402.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/index.js";
import { startTestServer, type TestServer } from "./helpers.js";

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 2, 8); // 2026-11-02 08:00 UTC
const GiB = 1024 ** 3;
// Prices double two hours in: usage before keeps the old prices.
const OLD = { vcpu: 0.02, mem: 0.0125, disk: 0.0002, ckMonth: 0.1 };
const NEW = { vcpu: 0.04, mem: 0.025, disk: 0.0004, ckMonth: 0.2 };
const PRICES = [
  { effective_from: "1970-01-01T00:00:00Z" },
  {
    effective_from: new Date(T0 + 2 * H).toISOString(),
    vcpu_hour_usd: NEW.vcpu,
    memory_gib_hour_usd: NEW.mem,
    disk_gib_hour_usd: NEW.disk,
    checkpoint_gib_month_usd: NEW.ckMonth,
  },
];

let t: TestServer;
const clock = new ManualClock(T0);
beforeAll(async () => {
  t = await startTestServer({ clock, prices: PRICES });
});
afterAll(async () => {
  await t?.close();
});

async function waitDurable(cid: string): Promise<any> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const r = await t.api("GET", `/v1/checkpoints/${cid}`);
    if (r.body.state === "DURABLE") return r.body;
    if (r.body.state === "FAILED") throw new Error(`checkpoint failed: ${r.body.error}`);
    if (Date.now() > deadline) throw new Error(`checkpoint still ${r.body.state}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

const usage = async (q: string) => {
  const r = await t.api("GET", `/v1/usage?from=${new Date(T0 - H).toISOString()}&to=${new Date(T0 + 24 * H).toISOString()}&${q}`);
  expect(r.status).toBe(200);
  return r.body;
};

describe("metering by the second, by state, against the price table", () => {
  let id = "";
  let cid = "";
  let storedBytes = 0;

  it("meters RUNNING, PAUSED, a price change and a checkpoint's storage exactly", { timeout: 300_000 }, async () => {
    const created = await t.api("POST", "/v1/sandboxes", {
      image: "sandtree/busybox",
      cpu_cores: 2,
      memory_gb: 0.5,
      disk_size_gb: 1,
      labels: { project: "metering" },
    });
    expect(created.status).toBe(201);
    id = created.body.id;
    await t.waitRunning(id); // RUNNING from T0 (the clock stands still while it boots)
    clock.advance(1 * H);
    expect((await t.api("POST", `/v1/sandboxes/${id}/pause`)).body.status).toBe("PAUSED");
    clock.advance(0.5 * H);
    expect((await t.api("POST", `/v1/sandboxes/${id}/resume`)).body.status).toBe("RUNNING");
    clock.advance(1 * H); // T0+2.5h: half an hour at the old prices, an hour at the new ones
    const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect(ck.status).toBe(201);
    cid = ck.body.id;
    storedBytes = (await waitDurable(cid)).stored_bytes;
    expect(storedBytes).toBeGreaterThan(0);
    clock.advance(2 * H); // T0+4.5h
    expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).body.status).toBe("TERMINATED");
    clock.advance(10 * H); // T0+14.5h: the checkpoint is stored on

    const running = (h: number, p: typeof OLD) => h * (2 * p.vcpu + 0.5 * p.mem + 1 * p.disk);
    const sandboxCost = running(1, OLD) + 0.5 * OLD.disk + running(0.5, OLD) + running(2.5, NEW);
    const gib = storedBytes / GiB;
    const checkpointCost = gib * 24 * (NEW.ckMonth / 730) + gib * 12 * (NEW.ckMonth / 730);
    const expected = sandboxCost + checkpointCost;

    const byDay = await usage("group_by=day");
    expect(byDay.currency).toBe("USD");
    expect(byDay.total.vcpu_seconds).toBeCloseTo(2 * 4 * 3600, 6);
    expect(byDay.total.memory_gib_seconds).toBeCloseTo(0.5 * 4 * 3600, 6);
    expect(byDay.total.disk_gib_seconds).toBeCloseTo(4.5 * 3600, 6);
    expect(byDay.total.checkpoint_gib_hours).toBeCloseTo(gib * 36, 9);
    // To the cent, and far closer.
    expect(Math.round(byDay.total.cost_usd * 100)).toBe(Math.round(expected * 100));
    expect(Math.abs(byDay.total.cost_usd - expected)).toBeLessThan(1e-9);
    expect(byDay.lines.map((l: any) => l.key)).toEqual(["2026-11-02"]);

    // Every grouping adds up to the same total.
    for (const q of [
      "group_by=hour",
      "group_by=sandbox",
      "group_by=team",
      "group_by=label&label_key=project",
      "group_by=label",
    ]) {
      const r = await usage(q);
      expect(Math.abs(r.total.cost_usd - expected), q).toBeLessThan(1e-9);
      const sum = r.lines.reduce((a: number, l: any) => a + l.cost_usd, 0);
      expect(Math.abs(sum - expected), q).toBeLessThan(1e-9);
    }
    const byHour = await usage("group_by=hour");
    expect(byHour.lines[0].key).toBe("2026-11-02T08:00:00Z");
    expect(byHour.lines[0].vcpu_seconds).toBeCloseTo(7200, 6);
    // 09:00-09:30 paused (disk only), 09:30-10:00 running.
    const nine = byHour.lines.find((l: any) => l.key === "2026-11-02T09:00:00Z");
    expect(nine.vcpu_seconds).toBeCloseTo(2 * 1800, 6);
    expect(nine.disk_gib_seconds).toBeCloseTo(3600, 6);
    expect((await usage("group_by=label&label_key=project")).lines.map((l: any) => l.key)).toEqual(["metering"]);
    const bySandbox = await usage("group_by=sandbox");
    expect(bySandbox.lines.map((l: any) => l.key)).toEqual([id]);

    // The objects' own cost_usd: the sandbox's runs and the checkpoint's storage.
    const sb = await t.api("GET", `/v1/sandboxes/${id}`);
    expect(Math.abs(sb.body.cost_usd - sandboxCost)).toBeLessThan(1e-9);
    const c = await t.api("GET", `/v1/checkpoints/${cid}`);
    expect(Math.abs(c.body.cost_usd - checkpointCost)).toBeLessThan(1e-9);
    const listed = await t.api("GET", "/v1/sandboxes?limit=10");
    expect(Math.abs(listed.body.sandboxes.find((x: any) => x.id === id).cost_usd - sandboxCost)).toBeLessThan(1e-9);

    // A window cut inside a RUNNING span bills only its part.
    const part = await t.api(
      "GET",
      `/v1/usage?from=${new Date(T0 + 0.25 * H).toISOString()}&to=${new Date(T0 + 0.75 * H).toISOString()}`,
    );
    expect(part.body.total.vcpu_seconds).toBeCloseTo(2 * 1800, 6);
    expect(Math.abs(part.body.total.cost_usd - running(0.5, OLD))).toBeLessThan(1e-9);
  });

  it("exports the same numbers as CSV", async () => {
    const res = await fetch(
      `${t.url}/v1/usage?group_by=sandbox&format=csv&from=${new Date(T0 - H).toISOString()}&to=${new Date(T0 + 24 * H).toISOString()}`,
      { headers: { authorization: `Bearer ${t.key}` } },
    );
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
    const rows = (await res.text()).trim().split("\n");
    expect(rows[0]).toBe("key,vcpu_seconds,memory_gib_seconds,disk_gib_seconds,checkpoint_gib_hours,cost_usd,volume_gib_hours");
    const json = await usage("group_by=sandbox");
    expect(rows[1]?.split(",")[0]).toBe(id);
    expect(Number(rows[1]?.split(",")[5])).toBe(json.lines[0].cost_usd);
    expect(rows.at(-1)?.split(",")[0]).toBe("total");
    expect(Number(rows.at(-1)?.split(",")[5])).toBe(json.total.cost_usd);
  });

  it("counts creations, concurrency and cost in GET /v1/stats", async () => {
    const r = await t.api("GET", "/v1/stats?window_hours=24&bucket_minutes=60");
    expect(r.status).toBe(200);
    expect(r.body.series).toHaveLength(24);
    // The clock is at T0+14.5h: the buckets start on the half hour.
    const at = (ms: number) => r.body.series.find((b: any) => Date.parse(b.t) <= ms && ms < Date.parse(b.t) + H);
    expect(at(T0 + 0.75 * H).running).toBe(1);
    expect(at(T0 + 10 * H).running).toBe(0);
    expect(r.body.running).toBe(0);
    expect(r.body.estimated_cost_usd).toBeGreaterThan(0);
  });

  it("refuses a create past the team's monthly budget with 402 BUDGET_EXCEEDED, and lets it go again when raised", async () => {
    const set = await t.api("PUT", "/v1/teams/default/budget", { monthly_budget_usd: 0.05 });
    expect(set.status).toBe(200);
    expect(set.body.month_to_date_usd).toBeGreaterThan(0.05);
    const refused = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(refused.status).toBe(402);
    expect(refused.body.code).toBe("BUDGET_EXCEEDED");
    expect(refused.body.details.monthly_budget_usd).toBe(0.05);
    const raised = await t.api("PUT", "/v1/teams/default/budget", { monthly_budget_usd: null });
    expect(raised.body.monthly_budget_usd).toBeNull();
    const ok = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(ok.status).toBe(201);
    await t.api("DELETE", `/v1/sandboxes/${ok.body.id}`);
  });

  it("exposes Prometheus metrics to an admin key only: statuses, creations by start path, exec latency, refusals, cost", async () => {
    const created = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(created.body.id);
    expect((await t.api("POST", `/v1/sandboxes/${created.body.id}/exec`, { command: "true" })).body.exit_code).toBe(0);
    const limits = await t.api("PUT", "/v1/teams/default/limits", { max_active_sandboxes: 1 });
    expect(limits.status).toBe(200);
    const refused = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(refused.body.code).toBe("QUOTA_SANDBOXES");
    await t.api("PUT", "/v1/teams/default/limits", { max_active_sandboxes: null });

    expect((await fetch(`${t.url}/metrics`)).status).toBe(401);
    const teamKey = (await t.api("POST", "/v1/keys", { team: "default" })).body.key;
    expect((await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${teamKey}` } })).status).toBe(403);
    const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${t.key}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    const value = (line: string) =>
      Number(
        text
          .split("\n")
          .find((l) => l.startsWith(`${line} `))
          ?.slice(line.length + 1),
      );
    expect(value('sandtree_sandboxes{status="RUNNING"}')).toBe(1);
    expect(value('sandtree_sandboxes{status="TERMINATED"}')).toBeGreaterThanOrEqual(1);
    expect(value('sandtree_sandbox_create_seconds_count{start_path="cold"}')).toBeGreaterThanOrEqual(1);
    expect(value('sandtree_sandbox_creations_total{start_path="cold"}')).toBeGreaterThanOrEqual(2);
    expect(value('sandtree_sandbox_create_failures_total{code="BUDGET_EXCEEDED"}')).toBe(1);
    expect(value('sandtree_sandbox_create_failures_total{code="QUOTA_SANDBOXES"}')).toBe(1);
    expect(value('sandtree_quota_refusals_total{code="QUOTA_SANDBOXES"}')).toBe(1);
    expect(value('sandtree_quota_refusals_total{code="BUDGET_EXCEEDED"}')).toBe(1);
    expect(value('sandtree_execs_total{outcome="ok"}')).toBe(1);
    expect(value("sandtree_exec_seconds_count")).toBe(1);
    expect(value("sandtree_checkpoint_stored_bytes")).toBe(storedBytes);
    expect(value("sandtree_metered_cost_usd")).toBeGreaterThan(0);
    await t.api("DELETE", `/v1/sandboxes/${created.body.id}`);
  });
});
