import { describe, expect, it } from "vitest";
import { serverForFile } from "./helpers.js";

const t = serverForFile();

const SMALL = { memory_gb: 0.25 };

async function run(id: string, command: string) {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; exit_code: number };
}

async function checkpoint(id: string) {
  const r = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  expect(["FROZEN", "DURABLE"]).toContain(r.body.state);
  return waitDurable(r.body.id);
}

async function waitDurable(cid: string) {
  for (let i = 0; i < 600; i++) {
    const r = await t.api("GET", `/v1/checkpoints/${cid}`);
    if (r.body.state === "DURABLE") return r.body;
    if (r.body.state === "FAILED") throw new Error(`checkpoint failed: ${r.body.error}`);
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error("checkpoint never became durable");
}

async function restore(cid: string) {
  const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: cid, ...SMALL });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  expect(r.body.source_checkpoint_id).toBe(cid);
  await t.waitRunning(r.body.id);
  return r.body.id as string;
}

const files = async (id: string) => (await run(id, "ls /data | sort | tr '\\n' ' '")).stdout.trim();

describe("a tree of checkpoints and forks", () => {
  it("gives every leaf exactly its ancestors' writes, survives deleting the source and the root checkpoint", {
    timeout: 600_000,
  }, async () => {
    const root = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", disk_size_gb: 1, ...SMALL });
    await t.waitRunning(root.body.id);
    await run(root.body.id, "mkdir -p /data && echo root > /data/root");
    const c0 = await checkpoint(root.body.id);
    expect(c0).toMatchObject({ depth: 1, parent_id: null, sandbox_id: root.body.id, image: "sandtree/busybox" });
    expect(c0.disk_size_bytes).toBe(1024 ** 3);
    expect(c0.stored_bytes).toBeGreaterThan(0);

    // The source may go once the checkpoint is DURABLE.
    await t.api("DELETE", `/v1/sandboxes/${root.body.id}`);

    const branches = await Promise.all([0, 1, 2].map(() => restore(c0.id)));
    const mids = await Promise.all(
      branches.map(async (b, i) => {
        await run(b, `echo b${i} > /data/branch-${i}`);
        const c = await checkpoint(b);
        expect(c).toMatchObject({ depth: 2, parent_id: c0.id });
        await t.api("DELETE", `/v1/sandboxes/${b}`);
        return c;
      }),
    );

    // Deleting the root checkpoint stops its bill but keeps the layer its descendants need.
    const del = await t.api("DELETE", `/v1/checkpoints/${c0.id}`);
    expect(del.status).toBe(200);
    expect(del.body.stored_bytes).toBe(0);

    for (const [i, mid] of mids.entries()) {
      const leaf = await restore(mid.id);
      expect(await files(leaf)).toBe(`branch-${i} root`);
      await run(leaf, `echo l${i} > /data/leaf-${i}`);
      const deep = await checkpoint(leaf);
      expect(deep).toMatchObject({ depth: 3, parent_id: mid.id });
      await t.api("DELETE", `/v1/sandboxes/${leaf}`);
      const again = await restore(deep.id);
      expect(await files(again)).toBe(`branch-${i} leaf-${i} root`);
      expect((await run(again, `cat /data/root /data/branch-${i} /data/leaf-${i}`)).stdout).toBe(`root\nb${i}\nl${i}\n`);
      await t.api("DELETE", `/v1/sandboxes/${again}`);
    }

    const listed = await t.api("GET", "/v1/checkpoints");
    expect(listed.body.checkpoints.filter((c: { depth: number }) => c.depth === 3)).toHaveLength(3);

    // Once nothing needs them, layers go: delete everything and the store is empty.
    for (const c of listed.body.checkpoints) await t.api("DELETE", `/v1/checkpoints/${c.id}`);
    expect((await t.api("GET", "/v1/checkpoints")).body.checkpoints).toEqual([]);
    const { readdirSync } = await import("node:fs");
    const path = await import("node:path");
    // Warm templates (tmpl-*) stay by design; no sandbox disk or checkpoint layer may.
    const left = readdirSync(path.join(t.dataDir, "layers")).filter((f) => f.endsWith(".qcow2") && !/^(base|tmpl)-/.test(f));
    expect(left).toEqual([]);
  });
});
