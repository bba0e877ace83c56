// Teams, API keys, quotas, rate limits and idempotency through the HTTP API. Images resolve
// through a stub that never finishes pulling, so sandboxes stay PROVISIONING (active) without
// booting VMs: the limits are about rows, not about QEMU.

import { DEFAULT_TEAM_LIMITS } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeHostAt, neverPulls, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
const small = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };

beforeAll(async () => {
  t = await startTestServer(fakeHostAt({ images: neverPulls }));
});
afterAll(async () => {
  await t?.close();
});

/** A fresh team and a (non-admin) key of it, plus a caller using that key. */
async function newTeam(name: string) {
  expect((await t.api("POST", "/v1/teams", { name })).status).toBe(201);
  const k = await t.api("POST", "/v1/keys", { team: name });
  expect(k.status).toBe(201);
  const as = (method: string, p: string, body?: unknown) => t.api(method, p, body, { authorization: `Bearer ${k.body.key}` });
  return { key: k.body as { id: string; key: string; team_id: string }, as };
}

async function setLimits(team: string, limits: Record<string, number | null>) {
  const r = await t.api("PUT", `/v1/teams/${team}/limits`, limits);
  expect(r.status).toBe(200);
  return r.body;
}

describe("teams and API keys", () => {
  it("an admin creates teams and keys; the key is shown once and listed by prefix only", async () => {
    const team = await t.api("POST", "/v1/teams", { name: "alpha" });
    expect(team.status).toBe(201);
    expect(team.body).toMatchObject({ name: "alpha", id: expect.stringMatching(/^team_/) });
    expect((await t.api("POST", "/v1/teams", { name: "alpha" })).body.code).toBe("ALREADY_EXISTS");
    expect((await t.api("POST", "/v1/teams", { name: "bad name" })).status).toBe(400);
    const teams = await t.api("GET", "/v1/teams");
    expect(teams.body.teams.map((x: { name: string }) => x.name)).toEqual(["default", "alpha"]);

    const key = await t.api("POST", "/v1/keys", { team: "alpha" });
    expect(key.status).toBe(201);
    expect(key.body).toMatchObject({ team: "alpha", admin: false, revoked_at: null, key: expect.stringMatching(/^st_/) });
    expect(key.body.prefix).toBe(key.body.key.slice(0, 7));
    expect((await t.api("POST", "/v1/keys", { team: "nope" })).body.code).toBe("TEAM_NOT_FOUND");

    const list = await t.api("GET", "/v1/keys");
    expect(list.status).toBe(200);
    expect(list.body.keys).toHaveLength(2);
    expect(JSON.stringify(list.body)).not.toContain(key.body.key);
    expect(list.body.keys.every((k: Record<string, unknown>) => !("key" in k) && typeof k.prefix === "string")).toBe(true);

    // The new key works, scoped to its team.
    const mine = await t.api("GET", "/v1/sandboxes", undefined, { authorization: `Bearer ${key.body.key}` });
    expect(mine.status).toBe(200);
  });

  it("non-admin keys get 403 FORBIDDEN on every admin endpoint", async () => {
    const { as } = await newTeam("beta");
    for (const [m, p, body] of [
      ["POST", "/v1/teams", { name: "evil" }],
      ["GET", "/v1/teams", undefined],
      ["POST", "/v1/keys", { team: "beta", admin: true }],
      ["GET", "/v1/keys", undefined],
      ["DELETE", "/v1/keys/key_whatever", undefined],
      ["PUT", "/v1/teams/beta/limits", { max_vcpus: 1_000_000 }],
    ] as const) {
      const r = await as(m, p, body);
      expect(r.status, `${m} ${p}`).toBe(403);
      expect(r.body.code).toBe("FORBIDDEN");
    }
    // A team reads its own limits, not another team's (which answers as missing).
    expect((await as("GET", "/v1/teams/beta/limits")).status).toBe(200);
    expect((await as("GET", "/v1/teams/default/limits")).body.code).toBe("TEAM_NOT_FOUND");
  });

  it("a revoked key is refused with 401 on its very next request", async () => {
    const { key, as } = await newTeam("gamma");
    expect((await as("GET", "/v1/sandboxes")).status).toBe(200);
    const revoked = await t.api("DELETE", `/v1/keys/${key.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).not.toBeNull();
    const after = await as("GET", "/v1/sandboxes");
    expect(after.status).toBe(401);
    expect(after.body.code).toBe("UNAUTHORIZED");
    expect((await t.api("DELETE", "/v1/keys/key_missing")).body.code).toBe("KEY_NOT_FOUND");
  });

  it("refuses to revoke the last admin key", async () => {
    const keys = await t.api("GET", "/v1/keys");
    const admin = keys.body.keys.find((k: { admin: boolean; revoked_at: string | null }) => k.admin && !k.revoked_at);
    const r = await t.api("DELETE", `/v1/keys/${admin.id}`);
    expect(r.status).toBe(409);
    expect((await t.api("GET", "/v1/teams")).status).toBe(200);
  });
});

describe("quotas and rate limits", () => {
  it("shows defaults and usage, changes limits, and null restores a default", async () => {
    await newTeam("limits");
    const r = await t.api("GET", "/v1/teams/limits/limits");
    expect(r.body.limits).toEqual(DEFAULT_TEAM_LIMITS);
    expect(r.body.usage).toMatchObject({ active_sandboxes: 0, vcpus: 0 });
    expect((await setLimits("limits", { max_vcpus: 8 })).limits.max_vcpus).toBe(8);
    expect((await setLimits("limits", { max_vcpus: null })).limits.max_vcpus).toBe(4096);
    expect((await t.api("PUT", "/v1/teams/limits/limits", { max_vcpus: -1 })).status).toBe(400);
    expect((await t.api("PUT", "/v1/teams/limits/limits", { bogus: 1 })).status).toBe(400);
    expect((await setLimits("limits", { sandbox_net_mbit: 50 })).limits.sandbox_net_mbit).toBe(50);
    const zero = await t.api("PUT", "/v1/teams/limits/limits", { sandbox_disk_mbps: 0 });
    expect([zero.status, zero.body.code]).toEqual([400, "VALIDATION_FAILED"]);
    expect((await t.api("PUT", "/v1/teams/nope/limits", {})).body.code).toBe("TEAM_NOT_FOUND");
  });

  it("50 concurrent creates against a limit of 3 admit exactly 3; the rest get 429 QUOTA_SANDBOXES", async () => {
    const { as } = await newTeam("burst3");
    await setLimits("burst3", { max_active_sandboxes: 3 });
    const answers = await Promise.all(Array.from({ length: 50 }, () => as("POST", "/v1/sandboxes", small)));
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status === 429);
    expect(created).toHaveLength(3);
    expect(refused).toHaveLength(47);
    expect(new Set(refused.map((a) => a.body.code))).toEqual(new Set(["QUOTA_SANDBOXES"]));
    const usage = (await as("GET", "/v1/teams/burst3/limits")).body.usage;
    expect(usage.active_sandboxes).toBe(3);
    // Deleting one frees a slot.
    expect((await as("DELETE", `/v1/sandboxes/${created[0]?.body.id}`)).body.status).toBe("TERMINATED");
    expect((await as("POST", "/v1/sandboxes", small)).status).toBe(201);
    expect((await as("POST", "/v1/sandboxes", small)).status).toBe(429);
  });

  it("names the limit in the code and sends Retry-After", async () => {
    await newTeam("sized");
    const key = (await t.api("POST", "/v1/keys", { team: "sized" })).body.key as string;
    const post = async (body: unknown) => {
      const res = await fetch(`${t.url}/v1/sandboxes`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
    };
    // Sizes a 2-core host holds (more than the host has is EXCEEDS_HOST_CAPACITY, before quotas).
    await setLimits("sized", { max_vcpus: 1, max_memory_gb: 0.5, max_storage_gb: 2 });
    const cpu = await post({ ...small, cpu_cores: 2 });
    expect([cpu.status, cpu.body.code]).toEqual([429, "QUOTA_VCPUS"]);
    expect(Number(cpu.retryAfter)).toBeGreaterThan(0);
    const mem = await post({ ...small, memory_gb: 0.75 });
    expect([mem.status, mem.body.code]).toEqual([429, "QUOTA_MEMORY"]);
    const disk = await post({ ...small, disk_size_gb: 3 });
    expect([disk.status, disk.body.code]).toEqual([429, "QUOTA_STORAGE"]);
    expect((await post(small)).status).toBe(201);

    await setLimits("sized", { max_creations_per_10s: 2, max_vcpus: null, max_memory_gb: null, max_storage_gb: null });
    const b = await post(small);
    expect(b.status).toBe(201);
    const burst = await post(small);
    expect([burst.status, burst.body.code]).toEqual([429, "RATE_LIMIT_BURST"]);
    expect(Number(burst.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(burst.retryAfter)).toBeLessThanOrEqual(10);

    await setLimits("sized", { max_creations_per_10s: null, max_creations_per_hour: 2 });
    const hourly = await post(small);
    expect([hourly.status, hourly.body.code]).toEqual([429, "RATE_LIMIT_HOURLY"]);
    expect(Number(hourly.retryAfter)).toBeGreaterThan(3000);
    expect(Number(hourly.retryAfter)).toBeLessThanOrEqual(3600);
  });
});

describe("idempotency keys", () => {
  it("the same key answers the same sandbox (200); a different body is 409 IDEMPOTENCY_MISMATCH", async () => {
    const { as } = await newTeam("idem");
    const body = { ...small, idempotency_key: "create-1", labels: { a: "1" } };
    const first = await as("POST", "/v1/sandboxes", body);
    expect(first.status).toBe(201);
    const again = await as("POST", "/v1/sandboxes", { ...body, labels: { a: "1" } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    const other = await as("POST", "/v1/sandboxes", { ...body, labels: { a: "2" } });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe("IDEMPOTENCY_MISMATCH");
    // Keys are per team: another team's same key creates its own sandbox.
    const { as: as2 } = await newTeam("idem2");
    const theirs = await as2("POST", "/v1/sandboxes", body);
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(first.body.id);
    expect((await as("GET", "/v1/sandboxes")).body.sandboxes).toHaveLength(1);
  });

  it("concurrent creates with one key make one sandbox", async () => {
    const { as } = await newTeam("idem3");
    const body = { ...small, idempotency_key: "same" };
    const answers = await Promise.all(Array.from({ length: 10 }, () => as("POST", "/v1/sandboxes", body)));
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(9);
  });

  it("validates the key and the secrets", async () => {
    expect((await t.api("POST", "/v1/sandboxes", { ...small, idempotency_key: "x".repeat(129) })).body.details.field).toBe(
      "idempotency_key",
    );
    expect((await t.api("POST", "/v1/sandboxes", { ...small, secrets: { "BAD-NAME": "v" } })).status).toBe(400);
    expect((await t.api("POST", "/v1/sandboxes", { ...small, secrets: { BIG: "x".repeat(32_769) } })).status).toBe(400);
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`S${i}`, "v"]));
    expect((await t.api("POST", "/v1/sandboxes", { ...small, secrets: many })).status).toBe(400);
  });
});
