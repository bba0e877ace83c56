import { execFileSync } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { busyboxForFile, layerFile, settleCheckpoint, type TestServer } from "./helpers.js";

let t: TestServer;
let id: string;
busyboxForFile((started) => ({ t, id } = started));

const run = async (sandbox: string, command: string) => (await t.api("POST", `/v1/sandboxes/${sandbox}/exec`, { command })).body;

const settle = (cid: string) => settleCheckpoint(t, cid, 120_000);

describe("checkpoint faults", () => {
  it("serializes concurrent checkpoints of one sandbox into a chain", { timeout: 300_000 }, async () => {
    const made = await Promise.all([0, 1, 2].map(() => t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {})));
    for (const m of made) expect(m.status).toBe(201);
    const settled = await Promise.all(made.map((m) => settle(m.body.id)));
    expect(settled.map((c) => c.state)).toEqual(["DURABLE", "DURABLE", "DURABLE"]);
    const byDepth = [...settled].sort((a, b) => a.depth - b.depth);
    expect(byDepth.map((c) => c.depth)).toEqual([1, 2, 3]);
    expect(byDepth[1].parent_id).toBe(byDepth[0].id);
    expect(byDepth[2].parent_id).toBe(byDepth[1].id);
    // Ten near-identical checkpoints cost about one: each layer holds only what changed.
    expect(byDepth[2].stored_bytes).toBeLessThan(2 * 1024 * 1024);
  });

  it("gives a filesystem that checks clean when taken during heavy writes", { timeout: 300_000 }, async () => {
    // A writer that keeps creating, appending and renaming files while the checkpoint is taken.
    const writer = fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: JSON.stringify({
        command:
          "mkdir -p /w; i=0; while [ $i -lt 400 ]; do head -c 65536 /dev/urandom > /w/f$i.tmp && mv /w/f$i.tmp /w/f$i; echo $i >> /w/log; i=$((i+1)); done",
      }),
    });
    await new Promise((r) => setTimeout(r, 700));
    const c = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect(c.status).toBe(201);
    await writer;
    const durable = await settle(c.body.id);
    expect(durable.state).toBe("DURABLE");
    // fsck the checkpoint's whole chain (base + layers) as a raw image, read-only.
    const work = mkdtempSync(path.join(tmpdir(), "sandtree-fsck-"));
    try {
      const raw = path.join(work, "disk.raw");
      execFileSync("qemu-img", ["convert", "-O", "raw", layerFile(t.dataDir, c.body.id), raw]);
      const out = execFileSync("e2fsck", ["-fn", raw], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      expect(out).toMatch(/files/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it("refuses to boot a corrupt layer with CHECKPOINT_CORRUPT", { timeout: 300_000 }, async () => {
    await run(id, "echo precious > /root/precious");
    const c = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect((await settle(c.body.id)).state).toBe("DURABLE");
    appendFileSync(layerFile(t.dataDir, c.body.id), Buffer.from("bit rot"));
    const before = (await t.api("GET", "/v1/sandboxes?limit=1000")).body.sandboxes.length;
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c.body.id, memory_gb: 0.25 });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("CHECKPOINT_CORRUPT");
    expect((await t.api("GET", "/v1/sandboxes?limit=1000")).body.sandboxes.length).toBe(before);
  });

  it("validates restore requests", async () => {
    const missing = await t.api("POST", "/v1/sandboxes", { checkpoint_id: "ck-nope" });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe("CHECKPOINT_NOT_FOUND");
    const both = await t.api("POST", "/v1/sandboxes", { checkpoint_id: "ck-nope", image: "sandtree/busybox" });
    expect(both.status).toBe(400);
    expect(both.body.details.field).toBe("image");
    expect((await t.api("GET", "/v1/checkpoints/ck-nope")).status).toBe(404);
    expect((await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, { ttl_seconds: 0 })).status).toBe(400);
  });

  it("fails a checkpoint whose source is deleted before it is DURABLE", { timeout: 300_000 }, async () => {
    const src = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(src.body.id);
    // Enough changed data that storing the layer takes a moment.
    await run(src.body.id, "head -c 200000000 /dev/zero > /root/big && sync");
    const c = await t.api("POST", `/v1/sandboxes/${src.body.id}/checkpoints`, {});
    expect(c.body.state).toBe("FROZEN");
    await t.api("DELETE", `/v1/sandboxes/${src.body.id}`);
    const settled = await settle(c.body.id);
    expect(settled.state).toBe("FAILED");
    expect(settled.error).toMatch(/source sandbox ended before the checkpoint was durable/);
    const restore = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c.body.id });
    expect(restore.status).toBe(409);
    expect(restore.body.code).toBe("CHECKPOINT_FAILED");
  });

  it("keeps one team's checkpoints invisible to another", { timeout: 120_000 }, async () => {
    const c = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    await settle(c.body.id);
    const team = await t.api("POST", "/v1/teams", { name: "intruders" });
    expect(team.status).toBe(201);
    const key = await t.api("POST", "/v1/keys", { team: "intruders" });
    const other = key.body.key as string;
    const as = (m: string, p: string, b?: unknown) => t.api(m, p, b, { authorization: `Bearer ${other}` });
    const missing = await as("GET", "/v1/checkpoints/ck-0000");
    for (const [m, p, b] of [
      ["GET", `/v1/checkpoints/${c.body.id}`],
      ["DELETE", `/v1/checkpoints/${c.body.id}`],
      ["POST", "/v1/sandboxes", { checkpoint_id: c.body.id }],
    ] as const) {
      const r = await as(m, p, b);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body.code).toBe(missing.body.code);
    }
    expect((await as("GET", `/v1/sandboxes/${id}/checkpoints`)).status).toBe(404);
    expect((await as("POST", `/v1/sandboxes/${id}/checkpoints`, {})).status).toBe(404);
    expect((await as("POST", `/v1/sandboxes/${id}/fork`, {})).status).toBe(404);
    expect((await as("GET", "/v1/checkpoints")).body.checkpoints).toEqual([]);
    expect((await t.api("GET", `/v1/checkpoints/${c.body.id}`)).body.state).toBe("DURABLE");
  });
});
