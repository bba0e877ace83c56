import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { layerFile, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
beforeAll(async () => {
  // Flatten from depth 3 on, so a short chain shows it.
  process.env.SANDTREE_FLATTEN_DEPTH = "3";
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
  delete process.env.SANDTREE_FLATTEN_DEPTH;
});

const chainLength = (file: string) =>
  (
    JSON.parse(
      execFileSync("qemu-img", ["info", "-U", "--backing-chain", "--output=json", file], { encoding: "utf8" }),
    ) as unknown[]
  ).length;

describe("flattening deep chains", () => {
  it("rewrites a deep layer over the image base, and restores still see every ancestor's writes", {
    timeout: 300_000,
  }, async () => {
    const sb = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(sb.body.id);
    const ids: string[] = [];
    for (let i = 1; i <= 4; i++) {
      await t.api("POST", `/v1/sandboxes/${sb.body.id}/exec`, { command: `echo ${i} > /root/gen-${i}` });
      const c = await t.api("POST", `/v1/sandboxes/${sb.body.id}/checkpoints`, {});
      await t.server.services.checkpoints.waitDurable(sb.body.team_id, c.body.id, 60_000);
      ids.push(c.body.id);
    }
    await t.server.services.checkpoints.flattened(ids);
    // Depth 4 without flattening: 4 layers + base. Flattened: 1 layer + base.
    expect(chainLength(layerFile(t.dataDir, ids[3]!))).toBe(2);
    expect(chainLength(layerFile(t.dataDir, ids[1]!))).toBe(3);
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ids[3], memory_gb: 0.25 });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await t.waitRunning(r.body.id);
    const out = await t.api("POST", `/v1/sandboxes/${r.body.id}/exec`, {
      command: "cat /root/gen-1 /root/gen-2 /root/gen-3 /root/gen-4",
    });
    expect(out.body.stdout).toBe("1\n2\n3\n4\n");
    // The source keeps running on the old inodes and can still checkpoint and be restored.
    await t.api("POST", `/v1/sandboxes/${sb.body.id}/exec`, { command: "echo 5 > /root/gen-5" });
    const c5 = await t.api("POST", `/v1/sandboxes/${sb.body.id}/checkpoints`, {});
    await t.server.services.checkpoints.waitDurable(sb.body.team_id, c5.body.id, 60_000);
    const r5 = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c5.body.id, memory_gb: 0.25 });
    await t.waitRunning(r5.body.id);
    const out5 = await t.api("POST", `/v1/sandboxes/${r5.body.id}/exec`, { command: "cat /root/gen-1 /root/gen-5" });
    expect(out5.body.stdout).toBe("1\n5\n");
  });
});
