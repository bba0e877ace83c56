import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const run = async (id: string, command: string) => (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command })).body;

async function waitForTemplate(): Promise<void> {
  // The first create boots cold and builds the template afterwards; poll with more creates.
  for (let i = 0; i < 120; i++) {
    const { readdirSync, existsSync } = await import("node:fs");
    const path = await import("node:path");
    const root = path.join(t.dataDir, "templates");
    if (existsSync(root) && readdirSync(root).some((k) => existsSync(path.join(root, k, "template.json")))) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error("no template was built");
}

describe("warm starts from a template", () => {
  it("boots the first sandbox cold, clones later ones warm, each its own guest", { timeout: 400_000 }, async () => {
    const first = await t.api("POST", "/v1/sandboxes", SPEC);
    const a = await t.waitRunning(first.body.id);
    expect(a.start_path).toBe("cold");
    await waitForTemplate();

    const clones = await Promise.all([0, 1].map(() => t.api("POST", "/v1/sandboxes", SPEC)));
    const [b, c] = await Promise.all(clones.map((r) => t.waitRunning(r.body.id)));
    expect(b.start_path).toBe("warm");
    expect(c.start_path).toBe("warm");
    // Each clone is its own guest: separate files, different random bytes, the host's clock.
    await run(b.id, "echo only-b > /root/mine");
    expect((await run(c.id, "cat /root/mine 2>&1 || echo absent")).stdout).toContain("absent");
    const rb = (await run(b.id, "head -c 16 /dev/urandom | od -An -tx1")).stdout;
    const rc = (await run(c.id, "head -c 16 /dev/urandom | od -An -tx1")).stdout;
    expect(rb).not.toBe(rc);
    // The guest's clock, bracketed by the host's around the exec (its latency is not the guest's error).
    const hostBefore = Date.now() / 1000;
    const guestNow = Number((await run(b.id, "date +%s")).stdout.trim());
    const hostAfter = Date.now() / 1000;
    expect(guestNow).toBeGreaterThanOrEqual(Math.floor(hostBefore) - 1);
    expect(guestNow).toBeLessThanOrEqual(Math.ceil(hostAfter) + 1);
    expect((await run(b.id, "cat /proc/1/comm")).stdout.trim()).toMatch(/init|sandtree/);
    const df = (await run(c.id, "df -k / | tail -1")).stdout.split(/\s+/);
    expect(Number(df[1])).toBeGreaterThan(900 * 1024);
    // A warm sandbox checkpoints and restores like any other.
    const ck = await t.api("POST", `/v1/sandboxes/${b.id}/checkpoints`, {});
    await t.server.services.checkpoints.waitDurable(b.team_id, ck.body.id, 60_000);
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck.body.id, memory_gb: 0.25 });
    await t.waitRunning(r.body.id);
    expect((await run(r.body.id, "cat /root/mine")).stdout).toBe("only-b\n");
    for (const id of [a.id, b.id, c.id, r.body.id]) await t.api("DELETE", `/v1/sandboxes/${id}`);
  });
});
