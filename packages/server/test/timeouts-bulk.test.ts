import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qemuPidsFor, runCli, startTestServer, type TestServer } from "./helpers.js";

const small = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitStatus(id: string, status: string, timeoutMs: number): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await t.api("GET", `/v1/sandboxes/${id}`);
    if (r.body.status === status) return r.body;
    if (Date.now() > deadline) throw new Error(`sandbox ${id} is ${r.body.status}, not ${status}`);
    await sleep(200);
  }
}

const cli = (args: string[]) => runCli(t, args);

describe("timeouts", () => {
  it("validates the timeout fields and reports them", async () => {
    for (const bad of [
      { timeout_minutes: 0 },
      { timeout_minutes: 7 * 24 * 60 + 1 },
      { idle_timeout_minutes: 0.01 },
      { idle_timeout_minutes: 1441 },
      { timeout_minutes: "5" },
    ]) {
      const r = await t.api("POST", "/v1/sandboxes", { ...small, ...bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
    }
    const def = await t.api("POST", "/v1/sandboxes", small);
    const unlimited = await t.api("POST", "/v1/sandboxes", { ...small, timeout_minutes: -1, idle_timeout_minutes: 30 });
    await t.api("POST", "/v1/sandboxes/bulk-delete", { ids: [def.body.id, unlimited.body.id] });
    expect(def.body).toMatchObject({ timeout_minutes: 60, idle_timeout_minutes: null });
    expect(Date.parse(def.body.expires_at) - Date.parse(def.body.created_at)).toBe(3_600_000);
    expect(def.body.last_activity_at).toBe(def.body.created_at);
    const got = await t.api("GET", `/v1/sandboxes/${unlimited.body.id}`);
    expect(got.body).toMatchObject({ timeout_minutes: null, idle_timeout_minutes: 30, expires_at: null });
  });

  it("moves a sandbox past timeout_minutes to TIMEOUT and stops its VM", async () => {
    const r = await t.api("POST", "/v1/sandboxes", { ...small, timeout_minutes: 0.1 });
    const sb = await waitStatus(r.body.id, "TIMEOUT", 60_000);
    expect(sb.error_reason).toContain("timeout_minutes");
    // Ended by the lifetime, not before it: the server's own record says so.
    expect(Date.parse(sb.expires_at) - Date.parse(sb.created_at)).toBe(6_000);
    expect(Date.parse(sb.terminated_at)).toBeGreaterThanOrEqual(Date.parse(sb.expires_at));
    // The status flips first; stopping the VM follows within moments.
    for (let i = 0; i < 100 && qemuPidsFor([sb.id]).length > 0; i++) await sleep(100);
    expect(qemuPidsFor([sb.id])).toEqual([]);
    expect((await t.api("POST", `/v1/sandboxes/${sb.id}/exec`, { command: "true" })).status).toBe(409);
  });

  it("keeps a used sandbox alive past idle_timeout_minutes, then ends it once idle", async () => {
    const r = await t.api("POST", "/v1/sandboxes", { ...small, idle_timeout_minutes: 0.1 });
    const id = r.body.id;
    // Booting is not idling: a reaper pass a minute after creation spares it while it boots.
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toMatch(/^(PENDING|PROVISIONING)$/);
    expect(await t.server.services.timeouts.sweep(Date.parse(r.body.created_at) + 60_000)).not.toContain(id);
    await t.waitRunning(id);
    const t0 = Date.now();
    // Commands every 2 s, then one running longer than the idle timeout: never idle.
    while (Date.now() - t0 < 9_000) {
      expect((await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "true" })).status).toBe(200);
      await sleep(2_000);
    }
    const long = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "sleep 9; echo awake" });
    expect(long.body.stdout).toBe("awake\n");
    const running = await t.api("GET", `/v1/sandboxes/${id}`);
    expect(running.body.status).toBe("RUNNING");
    // The long command's end is the last activity (written through: 9 s since the last write).
    const lastActivity = Date.parse(running.body.last_activity_at);
    expect(lastActivity).toBeGreaterThan(t0 + 9_000);
    // Status reads are not activity: it times out while the test only polls its status, and
    // only once a whole idle timeout (0.1 min) has passed since that last use.
    const sb = await waitStatus(id, "TIMEOUT", 30_000);
    expect(sb.error_reason).toContain("idle");
    expect(sb.last_activity_at).toBe(running.body.last_activity_at);
    expect(Date.parse(sb.terminated_at) - lastActivity).toBeGreaterThanOrEqual(6_000);
  });
});

describe("bulk calls", () => {
  it("deletes by labels or ids, reports unknown ids, and answers batch status", async () => {
    const mk = async (labels: Record<string, string>) =>
      (await t.api("POST", "/v1/sandboxes", { ...small, labels })).body.id as string;
    const a = [await mk({ run: "r1", x: "1" }), await mk({ run: "r1" }), await mk({ run: "r1" })];
    const b = await mk({ run: "r2" });
    const del = await t.api("POST", "/v1/sandboxes/bulk-delete", { labels: { run: "r1" } });
    expect(del.status).toBe(200);
    expect([...del.body.deleted].sort()).toEqual([...a].sort());
    expect(del.body.not_found).toEqual([]);

    const st = await t.api("POST", "/v1/sandboxes/batch-status", { ids: [...a, b, "sb-nope"] });
    expect(st.body.not_found).toEqual(["sb-nope"]);
    expect(st.body.sandboxes.filter((s: any) => a.includes(s.id)).map((s: any) => s.status)).toEqual([
      "TERMINATED",
      "TERMINATED",
      "TERMINATED",
    ]);
    expect(st.body.sandboxes.find((s: any) => s.id === b).status).not.toBe("TERMINATED");

    const again = await t.api("POST", "/v1/sandboxes/bulk-delete", { labels: { run: "r1" } });
    expect(again.body.deleted).toEqual([]);
    const byId = await t.api("POST", "/v1/sandboxes/bulk-delete", { ids: [b, "sb-nope"] });
    expect(byId.body).toEqual({ deleted: [b], not_found: ["sb-nope"] });
  });

  it("rejects bad bulk requests and list filters with 400", async () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `sb-${i}`);
    for (const body of [{}, { ids: ["x"], labels: { a: "b" } }, { ids: [] }, { ids: ids(1001) }, { labels: {} }]) {
      expect((await t.api("POST", "/v1/sandboxes/bulk-delete", body)).status, JSON.stringify(body)).toBe(400);
    }
    expect((await t.api("POST", "/v1/sandboxes/batch-status", { ids: ids(101) })).status).toBe(400);
    expect((await t.api("POST", "/v1/sandboxes/batch-status", { ids: ids(100) })).body.not_found).toHaveLength(100);
    expect((await t.api("GET", "/v1/sandboxes?status=NOPE")).status).toBe(400);
    expect((await t.api("GET", "/v1/sandboxes?label=novalue")).status).toBe(400);
    expect((await t.api("GET", "/v1/sandboxes?label=%20bad=1")).status).toBe(400);
  });

  it("sandtree sandbox delete --label deletes the matching sandboxes", async () => {
    const r = await t.api("POST", "/v1/sandboxes", { ...small, labels: { run: "42" } });
    const out = await cli(["sandbox", "delete", "--label", "run=42", "-y"]);
    expect(out, out.stderr).toMatchObject({ code: 0, stdout: `${r.body.id}\n` });
    expect((await t.api("GET", `/v1/sandboxes/${r.body.id}`)).body.status).toBe("TERMINATED");
    const both = await cli(["sandbox", "delete", r.body.id, "--label", "run=42", "-y"]);
    expect(both.code).toBe(2);
  });
});
