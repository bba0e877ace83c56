import { describe, expect, it } from "vitest";
import { serverForFile } from "./helpers.js";

const t = serverForFile();

describe("API without VMs", () => {
  it("serves health and the OpenAPI document without a key", async () => {
    const h = await fetch(`${t.url}/healthz`);
    expect(h.status).toBe(200);
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toContain("/v1/sandboxes/{id}/exec");
  });

  it("rejects a missing or wrong key with 401 UNAUTHORIZED", async () => {
    const none = await fetch(`${t.url}/v1/sandboxes`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { code: string }).code).toBe("UNAUTHORIZED");
    const bad = await t.api("GET", "/v1/sandboxes", undefined, { authorization: "Bearer st_nope" });
    expect(bad.status).toBe(401);
    expect(bad.body.code).toBe("UNAUTHORIZED");
  });

  it("names the field of an invalid size with 400 VALIDATION_FAILED", async () => {
    for (const [field, value] of [
      ["cpu_cores", 0],
      ["memory_gb", -1],
      ["disk_size_gb", 1.5],
      ["cpu_cores", "two"],
    ] as const) {
      const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", [field]: value });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
      expect(r.body.details.field).toBe(field);
      expect(typeof r.body.request_id).toBe("string");
    }
  });

  it("refuses unknown fields, malformed JSON and a missing image", async () => {
    const unknown = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", gpus: 8 });
    expect(unknown.status).toBe(400);
    const res = await fetch(`${t.url}/v1/sandboxes`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: "{not json",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("BAD_REQUEST");
    const missing = await t.api("POST", "/v1/sandboxes", {});
    expect(missing.status).toBe(400);
    expect(missing.body.details.field).toBe("image");
  });

  it("fails fast with IMAGE_NOT_FOUND for an unknown image", async () => {
    // Fast means the create call itself refuses (no sandbox is made to fail later).
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/no-such-image" });
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("IMAGE_NOT_FOUND");
    expect(r.body.message).toContain("sandtree/no-such-image");
    const list = await t.api("GET", "/v1/sandboxes");
    expect(list.body.sandboxes).toHaveLength(0);
  });

  it("answers 404 for a missing sandbox on every route", async () => {
    for (const [m, p] of [
      ["GET", "/v1/sandboxes/sb-missing"],
      ["DELETE", "/v1/sandboxes/sb-missing"],
      ["GET", "/v1/sandboxes/sb-missing/logs"],
      ["GET", "/v1/sandboxes/sb-missing/files?path=/etc/passwd"],
    ] as const) {
      const r = await t.api(m, p);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body.code).toBe("SANDBOX_NOT_FOUND");
    }
    const exec = await t.api("POST", "/v1/sandboxes/sb-missing/exec", { command: "true" });
    expect(exec.status).toBe(404);
  });

  it("validates list filters and pages", async () => {
    expect((await t.api("GET", "/v1/sandboxes?status=BOGUS")).status).toBe(400);
    expect((await t.api("GET", "/v1/sandboxes?label=novalue")).status).toBe(400);
    const r = await t.api("GET", "/v1/sandboxes?limit=5");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ sandboxes: [], next_cursor: null });
  });
});
