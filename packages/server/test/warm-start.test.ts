// Warm starts: a shape template per kernel, agent, CPUs and memory (not per image), saved before
// its guest reads any root disk; every start without its image's own template (another image, a
// fork, a restore, another disk size) is a clone that mounts its own disk. One server, a few
// VMs, reused across the checks.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
const scratch = mkdtempSync(path.join(tmpdir(), "sandtree-warm-"));
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const run = async (id: string, command: string) => (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command })).body;

/** Waits for the shape template (the one that waits for its root disk) to be built. */
async function waitForTemplate(): Promise<void> {
  // The first start boots cold and the templates build afterwards, in the background.
  const root = path.join(t.dataDir, "templates");
  const isShape = (k: string) => {
    const meta = path.join(root, k, "template.json");
    return existsSync(meta) && JSON.parse(readFileSync(meta, "utf8")).rootWait === true;
  };
  for (let i = 0; i < 240; i++) {
    if (existsSync(root) && readdirSync(root).some(isShape)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error("no shape template was built");
}

async function checkpoint(id: string, teamId: string): Promise<string> {
  const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
  expect(ck.status, JSON.stringify(ck.body)).toBe(201);
  await t.server.services.checkpoints.waitDurable(teamId, ck.body.id, 60_000);
  return ck.body.id;
}

describe("warm starts from one template", () => {
  it("clones the first start of another image, a larger disk, a fork and a restore", { timeout: 600_000 }, async () => {
    const first = await t.api("POST", "/v1/sandboxes", SPEC);
    const a = await t.waitRunning(first.body.id);
    expect(a.start_path).toBe("cold");
    await waitForTemplate();
    await t.api("DELETE", `/v1/sandboxes/${a.id}`);

    // Another busybox, and the first Debian sandbox ever, on a 3 GiB disk: both clones.
    const made = await Promise.all([
      t.api("POST", "/v1/sandboxes", SPEC),
      t.api("POST", "/v1/sandboxes", { image: "sandtree/debian", memory_gb: 0.25, disk_size_gb: 3 }),
    ]);
    const [b, c] = await Promise.all(made.map((r) => t.waitRunning(r.body.id)));
    expect(b.start_path).toBe("warm");
    expect(c.start_path).toBe("warm");
    // The `running` event says where the start's time went: QMP, the state loaded, the agent's answer.
    const logs = await t.api("GET", `/v1/sandboxes/${b.id}/logs`);
    const messages = (logs.body.events as Array<{ message: string }>).map((e) => e.message).join("\n");
    expect(messages).toMatch(/running \(\w+, pid \d+\): launched \d+ ms, qmp \d+ ms, loaded \d+ ms, agent \d+ ms, \d+ HELLOs?/);
    expect((await run(c.id, "cat /etc/os-release")).stdout).toContain("Debian");
    expect((await run(b.id, "cat /etc/os-release 2>&1 || echo none")).stdout).not.toContain("Debian");
    // The clone sees its own disk's size, not the template's placeholder, and its filesystem fills it.
    const size = (await run(c.id, "cat /sys/block/vda/size")).stdout.trim();
    expect(Number(size) * 512).toBe(3 * 1024 ** 3);
    const df = (await run(c.id, "df -k / | tail -1")).stdout.trim().split(/\s+/);
    expect(Number(df[1])).toBeGreaterThan(2.8 * 1024 * 1024);
    // Each clone is its own guest: separate files, different random bytes, the host's clock.
    await run(b.id, "echo only-b > /root/mine");
    expect((await run(c.id, "cat /root/mine 2>&1 || echo absent")).stdout).toContain("absent");
    const rb = (await run(b.id, "head -c 16 /dev/urandom | od -An -tx1")).stdout;
    const rc = (await run(c.id, "head -c 16 /dev/urandom | od -An -tx1")).stdout;
    expect(rb).not.toBe(rc);
    const hostBefore = Date.now() / 1000;
    const guestNow = Number((await run(b.id, "date +%s")).stdout.trim());
    const hostAfter = Date.now() / 1000;
    expect(guestNow).toBeGreaterThanOrEqual(Math.floor(hostBefore) - 1);
    expect(guestNow).toBeLessThanOrEqual(Math.ceil(hostAfter) + 1);
    expect((await run(b.id, "cat /proc/1/comm")).stdout.trim()).toMatch(/init|sandtree/);
    await t.api("DELETE", `/v1/sandboxes/${c.id}`);

    // A file written, checkpointed (so it sits in a lower layer), then overwritten in place:
    // same size, same inode. A fork taken after that reads the new bytes.
    await run(b.id, "head -c 65536 /dev/zero | tr '\\0' A > /root/f && sync");
    const inode = (await run(b.id, "stat -c %i /root/f")).stdout.trim();
    await checkpoint(b.id, b.team_id);
    const over = await run(b.id, "head -c 65536 /dev/zero | tr '\\0' B | dd of=/root/f conv=notrunc 2>/dev/null; sync");
    expect(over.exit_code).toBe(0);
    expect((await run(b.id, "stat -c %i /root/f")).stdout.trim()).toBe(inode);
    const fork = await t.api("POST", `/v1/sandboxes/${b.id}/fork`, {});
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const child = await t.waitRunning(fork.body.id);
    expect(child.start_path).toBe("warm");
    expect((await run(child.id, "stat -c %i /root/f")).stdout.trim()).toBe(inode);
    expect((await run(child.id, "tr -d B < /root/f | wc -c; wc -c < /root/f")).stdout.split(/\s+/).filter(Boolean)).toEqual([
      "0",
      "65536",
    ]);
    expect((await run(child.id, "cat /root/mine")).stdout).toBe("only-b\n");

    // The child's disk, as a checkpoint of it seals it, is a clean ext4 (read from the host).
    const ckChild = await checkpoint(child.id, child.team_id);
    const { layer } = await t.server.services.checkpoints.restorePath(child.team_id, ckChild);
    const top = path.join(t.dataDir, "layers", layer);
    const raw = path.join(scratch, "child.raw");
    execFileSync("qemu-img", ["convert", "-U", "-O", "raw", top, raw]);
    execFileSync("e2fsck", ["-fn", raw], { stdio: "pipe" }); // throws on any problem (exit code != 0)

    // A restore of that checkpoint is a clone too, with the child's files.
    const restored = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ckChild, memory_gb: 0.25 });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    const r = await t.waitRunning(restored.body.id);
    expect(r.start_path).toBe("warm");
    expect((await run(r.id, "head -c 4 /root/f")).stdout).toBe("BBBB");
    for (const id of [b.id, child.id, r.id]) await t.api("DELETE", `/v1/sandboxes/${id}`);
  });
});
