import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HeadObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlobCorruptError, BlobMissingError, S3BlobStore, type S3BlobStoreOptions } from "../src/index.js";
import { blobStoreConformance } from "./blob-store-conformance.js";
import { corruptObject, S3RVER_CREDENTIALS, startCuttingProxy, startS3, type TestS3 } from "./helpers/s3-server.js";

const MIB = 1024 * 1024;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

let s3: TestS3;
const roots: string[] = [];
const stores: S3BlobStore[] = [];
let n = 0;

beforeAll(async () => {
  s3 = await startS3();
});

afterAll(async () => {
  for (const s of stores) s.close();
  await s3?.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A store over the test bucket, with a fresh local cache and its own key prefix. */
function makeStore(over: Partial<S3BlobStoreOptions> = {}): { store: S3BlobStore; scratch: string; prefix: string } {
  const root = mkdtempSync(path.join(tmpdir(), "sandtree-s3blobs-"));
  roots.push(root);
  const scratch = path.join(root, "scratch");
  mkdirSync(scratch);
  const prefix = `deploy-${++n}/`;
  const store = new S3BlobStore({
    bucket: s3.bucket,
    prefix,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    localDir: path.join(root, "layers"),
    partSize: 5 * MIB,
    clientConfig: { credentials: S3RVER_CREDENTIALS },
    ...over,
  });
  stores.push(store);
  return { store, scratch, prefix };
}

function stage(scratch: string, data: Buffer): string {
  const f = path.join(scratch, `stage-${randomBytes(4).toString("hex")}`);
  writeFileSync(f, data);
  return f;
}

blobStoreConformance("S3 (s3rver)", async () => {
  const { store, scratch, prefix } = makeStore();
  return {
    store,
    scratch,
    corrupt: async (key) => {
      await corruptObject(s3, `${prefix}${key}`, {});
      rmSync(path.join(store.localDir, key), { force: true });
    },
  };
});

describe("S3BlobStore", () => {
  it("keeps the sha256 and size as object metadata, under the key prefix", async () => {
    const { store, scratch, prefix } = makeStore();
    const data = randomBytes(200_000);
    await store.put("ck-m.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    const head = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${prefix}ck-m.qcow2` }));
    expect(head.Metadata).toEqual({ sha256: sha(data), size: String(data.length) });
    const other = makeStore();
    expect(await other.store.list()).not.toContain("ck-m.qcow2");
    expect(await store.list()).toEqual(["ck-m.qcow2"]);
  });

  it("refuses to store a file whose bytes are not the recorded hash, and leaves no object", async () => {
    const { store, scratch } = makeStore();
    const data = randomBytes(50_000);
    const wrong = sha(Buffer.from("something else"));
    await expect(store.put("ck-lie.qcow2", stage(scratch, data), { sha256: wrong, size: data.length })).rejects.toBeInstanceOf(
      BlobCorruptError,
    );
    expect(await store.stat("ck-lie.qcow2")).toBeNull();
  });

  it("downloads again when the local cache is gone or damaged", async () => {
    const { store, scratch } = makeStore();
    const data = randomBytes(6 * MIB);
    await store.put("ck-c.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    rmSync(path.join(store.localDir, "ck-c.qcow2"));
    const p = await store.materialize("ck-c.qcow2", sha(data));
    expect(sha(readFileSync(p))).toBe(sha(data));
    writeFileSync(p, "damaged");
    expect(sha(readFileSync(await store.materialize("ck-c.qcow2", sha(data))))).toBe(sha(data));
  });

  it("a corrupt object is BlobCorruptError and leaves no local file behind", async () => {
    const { store, scratch, prefix } = makeStore();
    const data = randomBytes(300_000);
    await store.put("ck-x.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    await corruptObject(s3, `${prefix}ck-x.qcow2`, { sha256: sha(data), size: String(data.length) });
    rmSync(path.join(store.localDir, "ck-x.qcow2"));
    await expect(store.materialize("ck-x.qcow2", sha(data))).rejects.toBeInstanceOf(BlobCorruptError);
    expect(readdirSync(store.localDir).filter((f) => f.includes("ck-x"))).toEqual([]);
    await expect(store.materialize("ck-gone.qcow2", sha(data))).rejects.toBeInstanceOf(BlobMissingError);
  });

  it("retries a download whose connection was cut, and one to a server that was down", async () => {
    const { store: writer, scratch, prefix } = makeStore();
    const data = randomBytes(2 * MIB);
    await writer.put("ck-t.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    // A proxy that cuts its first connection after 64 KiB of the answer.
    const proxy = await startCuttingProxy(s3.port, "down", 64 * 1024);
    try {
      const { store: reader } = makeStore({ endpoint: proxy.endpoint, prefix });
      const p = await reader.materialize("ck-t.qcow2", sha(data));
      expect(sha(readFileSync(p))).toBe(sha(data));
      expect(proxy.cut()).toBe(true);
    } finally {
      proxy.close();
    }
    // The server down, then back on the same port while the download is being retried.
    const { store: again } = makeStore({ prefix });
    await s3.stop();
    const pending = again.materialize("ck-t.qcow2", sha(data));
    setTimeout(() => void s3.restart(), 300);
    expect(sha(readFileSync(await pending))).toBe(sha(data));
  });

  it("retries a multipart upload cut on the way, and one to a server that was down", async () => {
    const proxy = await startCuttingProxy(s3.port, "up", 1 * MIB);
    try {
      const { store, scratch, prefix } = makeStore({ endpoint: proxy.endpoint });
      const data = randomBytes(11 * MIB);
      await store.put("ck-u.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
      expect(proxy.cut()).toBe(true);
      const head = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${prefix}ck-u.qcow2` }));
      expect(head).toMatchObject({ ContentLength: data.length, Metadata: { sha256: sha(data), size: String(data.length) } });
    } finally {
      proxy.close();
    }
    const { store, scratch } = makeStore();
    const data = randomBytes(100_000);
    await s3.stop();
    const pending = store.put("ck-v.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    setTimeout(() => void s3.restart(), 300);
    await pending;
    expect(await store.stat("ck-v.qcow2")).toEqual({ size: data.length });
  });

  it("shares one download between concurrent restores; an abort ends only the caller's wait", async () => {
    const { store: writer, scratch, prefix } = makeStore();
    const data = randomBytes(3 * MIB);
    await writer.put("ck-s.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    const { store } = makeStore({ prefix });
    const gaveUp = new AbortController();
    const a = store.materialize("ck-s.qcow2", sha(data), { signal: gaveUp.signal });
    const b = store.materialize("ck-s.qcow2", sha(data));
    gaveUp.abort(new Error("the restore was cancelled"));
    await expect(a).rejects.toThrow(/cancelled/);
    expect(sha(readFileSync(await b))).toBe(sha(data));
    const alone = new AbortController();
    rmSync(await b);
    const c = store.materialize("ck-s.qcow2", sha(data), { signal: alone.signal });
    alone.abort(new Error("cancelled again"));
    await expect(c).rejects.toThrow(/cancelled again/);
  });

  it("removes at start what a download of an earlier process left, never one of this process's", () => {
    const root = mkdtempSync(path.join(tmpdir(), "sandtree-s3blobs-"));
    roots.push(root);
    const layers = path.join(root, "layers");
    mkdirSync(layers);
    const stale = path.join(layers, ".tmp-dl-ck-a.qcow2-0123abcd");
    const fresh = path.join(layers, ".tmp-dl-ck-b.qcow2-4567cdef");
    const layer = path.join(layers, "ck-c.qcow2");
    for (const f of [stale, fresh, layer]) writeFileSync(f, "bytes");
    const earlier = new Date(performance.timeOrigin - 60_000);
    utimesSync(stale, earlier, earlier);
    utimesSync(layer, earlier, earlier);
    makeStore({ localDir: layers });
    expect(readdirSync(layers).sort()).toEqual([".tmp-dl-ck-b.qcow2-4567cdef", "ck-c.qcow2"]);
    expect(existsSync(fresh)).toBe(true);
  });

  it("deletes the object and the local copy, idempotently", async () => {
    const { store, scratch, prefix } = makeStore();
    const data = randomBytes(10_000);
    await store.put("ck-d.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
    await store.delete("ck-d.qcow2");
    await store.delete("ck-d.qcow2");
    expect(existsSync(path.join(store.localDir, "ck-d.qcow2"))).toBe(false);
    const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
    expect(listed.Contents ?? []).toEqual([]);
  });
});
