import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

async function userKey(team: string) {
  expect((await t.api("POST", "/v1/teams", { name: team })).status).toBe(201);
  const k = await t.api("POST", "/v1/keys", { team });
  return (method: string, p: string, body?: unknown) => t.api(method, p, body, { authorization: `Bearer ${k.body.key}` });
}

describe("image aliases", () => {
  it("an admin maps a public image name to a local image; creates by that name boot the target", {
    timeout: 300_000,
  }, async () => {
    const set = await t.api("PUT", "/v1/images/aliases", {
      name: "docker.io/library/python:3.11-slim",
      target: "sandtree/busybox",
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    // Names are kept as Docker compares them: Docker Hub's in their short form, tags explicit.
    expect(set.body).toMatchObject({ name: "python:3.11-slim", target: "sandtree/busybox:latest" });

    const sb = await t.api("POST", "/v1/sandboxes", { image: "python:3.11-slim", memory_gb: 0.25, disk_size_gb: 1 });
    expect(sb.status, JSON.stringify(sb.body)).toBe(201);
    // The sandbox records the target: a later change of the alias never changes its disk.
    expect(sb.body.image).toBe("sandtree/busybox:latest");
    await t.waitRunning(sb.body.id);
    const out = await t.api("POST", `/v1/sandboxes/${sb.body.id}/exec`, { command: ["sh", "-c", "busybox | head -1"] });
    expect(out.body.stdout).toContain("BusyBox");
    const events = await t.api("GET", `/v1/sandboxes/${sb.body.id}/logs`);
    const texts = JSON.stringify(events.body);
    expect(texts).toContain("created from python:3.11-slim (an image alias for sandtree/busybox:latest)");
    await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`);
  });

  it("lists aliases to every key, lets only admin keys change them, and refuses a target that does not resolve", async () => {
    const as = await userKey("alias-users");
    const listed = await as("GET", "/v1/images/aliases");
    expect(listed.status).toBe(200);
    expect(listed.body.aliases.map((a: { name: string }) => a.name)).toContain("python:3.11-slim");
    expect((await as("PUT", "/v1/images/aliases", { name: "base", target: "sandtree/busybox" })).body.code).toBe("FORBIDDEN");
    expect((await as("DELETE", `/v1/images/aliases/${encodeURIComponent("python:3.11-slim")}`)).body.code).toBe("FORBIDDEN");

    const dangling = await t.api("PUT", "/v1/images/aliases", { name: "base", target: "sandtree/no-such-image" });
    expect(dangling.status).toBe(404);
    expect(dangling.body.code).toBe("IMAGE_NOT_FOUND");
    const selfish = await t.api("PUT", "/v1/images/aliases", { name: "sandtree/busybox", target: "sandtree/busybox:latest" });
    expect(selfish.body.code).toBe("VALIDATION_FAILED");
    expect((await t.api("PUT", "/v1/images/aliases", { name: "base", target: "sandtree/busybox", extra: 1 })).status).toBe(400);
    expect((await t.api("PUT", "/v1/images/aliases", { name: "Not A Name", target: "sandtree/busybox" })).status).toBe(400);

    expect((await t.api("PUT", "/v1/images/aliases", { name: "ghcr.io/acme/tool:2", target: "sandtree/busybox" })).status).toBe(
      200,
    );
    const del = await t.api("DELETE", `/v1/images/aliases/${encodeURIComponent("ghcr.io/acme/tool:2")}`);
    expect(del.status).toBe(204);
    const again = await t.api("DELETE", `/v1/images/aliases/${encodeURIComponent("ghcr.io/acme/tool:2")}`);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("NOT_FOUND");
  });
});
