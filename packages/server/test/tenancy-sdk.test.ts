// The SDK's teams and keys against the real server (no VMs needed).
import { AuthenticationError, PermissionError, RateLimitError, SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let admin: SandtreeClient;
beforeAll(async () => {
  t = await startTestServer();
  admin = new SandtreeClient({ apiUrl: t.url, apiKey: t.key });
});
afterAll(async () => {
  await t?.close();
});

describe("client.teams and client.keys", () => {
  it("creates a team and a key, lists them, sets limits, revokes the key", async () => {
    const team = await admin.teams.create("sdk-team");
    expect(team.name).toBe("sdk-team");
    expect((await admin.teams.list()).map((x) => x.name)).toContain("sdk-team");
    const key = await admin.keys.create("sdk-team");
    expect(key.key).toMatch(/^st_/);
    expect((await admin.keys.list()).find((k) => k.id === key.id)).toMatchObject({ team: "sdk-team", admin: false });

    const member = new SandtreeClient({ apiUrl: t.url, apiKey: key.key, retry: { maxAttempts: 1 } });
    await expect(member.teams.create("x")).rejects.toBeInstanceOf(PermissionError);
    const limits = await admin.teams.setLimits("sdk-team", { max_active_sandboxes: 0 });
    expect(limits.limits.max_active_sandboxes).toBe(0);
    expect((await member.teams.getLimits("sdk-team")).limits.max_active_sandboxes).toBe(0);
    const refused = await member.sandboxes.create({ image: "sandtree/busybox" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimitError);
    expect(refused).toMatchObject({ code: "QUOTA_SANDBOXES", retryAfterMs: 10_000 });

    const revoked = await admin.keys.revoke(key.id);
    expect(revoked.revoked_at).not.toBeNull();
    await expect(member.sandboxes.list()).rejects.toBeInstanceOf(AuthenticationError);
  });
});
