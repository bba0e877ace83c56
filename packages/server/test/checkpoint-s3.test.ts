import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { HeadObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { corruptObject, startS3, type TestS3, useS3Credentials } from "../../host/test/helpers/s3-server.js";
import { layerFile, settleCheckpoint, startTestServer, type TestServer } from "./helpers.js";

// The server reads object-store credentials from the standard AWS variables, as in production.
let restoreEnv = () => {};
let s3: TestS3;
let t: TestServer;
const PREFIX = "fleet-a";

beforeAll(async () => {
  s3 = await startS3();
  restoreEnv = useS3Credentials();
  // Chains of depth 2 get flattened: the flattened layer must reach the bucket too.
  t = await startTestServer({
    blobStore: `s3://${s3.bucket}/${PREFIX}?endpoint=${s3.endpoint}&region=us-east-1`,
    flattenDepth: 2,
  });
});

afterAll(async () => {
  await t?.close();
  await s3?.close();
  restoreEnv();
});

const SMALL = { memory_gb: 0.25, disk_size_gb: 1 };
const run = async (sandbox: string, command: string) => (await t.api("POST", `/v1/sandboxes/${sandbox}/exec`, { command })).body;

const settle = (cid: string) => settleCheckpoint(t, cid, 240_000);

describe("checkpoints in an S3 bucket", () => {
  it("is DURABLE only once in the bucket, restores and flattens through it, and refuses a corrupt object", {
    timeout: 400_000,
  }, async () => {
    const parent = (await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", ...SMALL })).body.id as string;
    await t.waitRunning(parent);
    expect((await run(parent, "echo from-the-parent > /root/note && sync")).exit_code).toBe(0);

    // With the object store down, the checkpoint freezes but cannot become DURABLE.
    await s3.stop();
    const c = await t.api("POST", `/v1/sandboxes/${parent}/checkpoints`, {});
    expect(c.status).toBe(201);
    await new Promise((r) => setTimeout(r, 200));
    expect((await t.api("GET", `/v1/checkpoints/${c.body.id}`)).body.state).toBe("FROZEN");
    await s3.restart();
    expect((await settle(c.body.id)).state).toBe("DURABLE");

    // The object is in the bucket under the prefix, with the layer's sha256 as metadata.
    const layer = layerFile(t.dataDir, c.body.id);
    const key = `${PREFIX}/${path.basename(layer)}`;
    const head = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
    const sha256 = createHash("sha256").update(readFileSync(layer)).digest("hex");
    expect(head.Metadata?.sha256).toBe(sha256);
    expect(head.ContentLength).toBe(readFileSync(layer).length);

    // The local cache goes (with the parent): the fork's layers come back from the bucket.
    expect((await t.api("DELETE", `/v1/sandboxes/${parent}`)).status).toBeLessThan(300);
    rmSync(layer);
    const child = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c.body.id, memory_gb: 0.25 });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    await t.waitRunning(child.body.id);
    expect((await run(child.body.id, "cat /root/note")).stdout).toBe("from-the-parent\n");
    expect(existsSync(layer)).toBe(true);

    // A checkpoint of the fork (depth 2) is flattened in the background: the bucket gets the
    // flattened bytes under the hash now recorded, and a restore from the bucket alone sees both writes.
    expect((await run(child.body.id, "echo from-the-fork > /root/fork && sync")).exit_code).toBe(0);
    const c2 = await t.api("POST", `/v1/sandboxes/${child.body.id}/checkpoints`, {});
    expect((await settle(c2.body.id)).state).toBe("DURABLE");
    await t.server.services.checkpoints.flattened([c2.body.id]);
    await t.api("DELETE", `/v1/sandboxes/${child.body.id}`);
    const layer2 = layerFile(t.dataDir, c2.body.id);
    const key2 = `${PREFIX}/${path.basename(layer2)}`;
    const head2 = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key2 }));
    expect(head2.Metadata?.sha256).toBe(createHash("sha256").update(readFileSync(layer2)).digest("hex"));
    expect(execFileSync("qemu-img", ["info", "-U", "--output=json", layer2], { encoding: "utf8" })).toMatch(
      /"backing-filename": "base-/,
    );
    rmSync(layer);
    rmSync(layer2);
    const grandchild = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c2.body.id, memory_gb: 0.25 });
    expect(grandchild.status, JSON.stringify(grandchild.body)).toBe(201);
    await t.waitRunning(grandchild.body.id);
    expect((await run(grandchild.body.id, "cat /root/note /root/fork")).stdout).toBe("from-the-parent\nfrom-the-fork\n");
    await t.api("DELETE", `/v1/sandboxes/${grandchild.body.id}`);

    // Bit rot in the bucket, no local copy: the restore is refused with the stable code.
    await corruptObject(s3, key, { sha256, size: String(head.ContentLength) });
    rmSync(layer);
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: c.body.id, memory_gb: 0.25 });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("CHECKPOINT_CORRUPT");
    expect(existsSync(layer)).toBe(false);
  });
});
