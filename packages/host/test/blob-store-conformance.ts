import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BlobCorruptError, BlobMissingError, type BlobStore } from "../src/index.js";

export interface ConformanceSubject {
  store: BlobStore;
  /** Where blobs are staged before put (on the store's local filesystem). */
  scratch: string;
  /** Damages the stored bytes of `key` wherever the store keeps its durable copy (and its local one). */
  corrupt(key: string): Promise<void>;
}

/** Every BlobStore implementation must pass this suite (local directory, S3). */
export function blobStoreConformance(name: string, make: () => Promise<ConformanceSubject>): void {
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
  const stage = (scratch: string, data: Buffer) => {
    const f = path.join(scratch, `stage-${randomBytes(4).toString("hex")}`);
    writeFileSync(f, data);
    return f;
  };

  describe(`BlobStore conformance: ${name}`, () => {
    it("stores, materializes with a verified hash, lists and deletes idempotently", async () => {
      const { store, scratch } = await make();
      const data = randomBytes(300_000);
      await store.put("ck-a.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
      expect(await store.stat("ck-a.qcow2")).toEqual({ size: data.length });
      expect(await store.list()).toContain("ck-a.qcow2");
      const p = await store.materialize("ck-a.qcow2", sha(data));
      expect(path.dirname(p)).toBe(store.localDir);
      await store.delete("ck-a.qcow2");
      await store.delete("ck-a.qcow2");
      expect(await store.stat("ck-a.qcow2")).toBeNull();
      expect(await store.list()).not.toContain("ck-a.qcow2");
    });

    it("refuses a blob whose bytes changed, and a missing one", async () => {
      const { store, scratch, corrupt } = await make();
      const data = randomBytes(100_000);
      await store.put("ck-b.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
      await store.materialize("ck-b.qcow2", sha(data));
      await corrupt("ck-b.qcow2");
      await expect(store.materialize("ck-b.qcow2", sha(data))).rejects.toBeInstanceOf(BlobCorruptError);
      await expect(store.materialize("ck-none.qcow2", sha(data))).rejects.toBeInstanceOf(BlobMissingError);
    });

    it("stores a blob larger than a multipart part and gets the same bytes back", async () => {
      const { store, scratch } = await make();
      const data = randomBytes(12 * 1024 * 1024 + 12_345);
      await store.put("ck-big.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
      expect(await store.stat("ck-big.qcow2")).toEqual({ size: data.length });
      const p = await store.materialize("ck-big.qcow2", sha(data));
      expect(sha(readFileSync(p))).toBe(sha(data));
      await store.delete("ck-big.qcow2");
    });

    it("replaces a blob's content under a new hash only when the commit agrees", async () => {
      const { store, scratch } = await make();
      const a = randomBytes(40_000);
      const b = randomBytes(40_000);
      await store.put("ck-r.qcow2", stage(scratch, a), { sha256: sha(a), size: a.length });
      const refused = stage(scratch, b);
      expect(await store.replace("ck-r.qcow2", refused, { sha256: sha(b), size: b.length }, () => false)).toBe(false);
      expect(existsSync(refused)).toBe(false);
      expect(await store.replace("ck-r.qcow2", stage(scratch, b), { sha256: sha(b), size: b.length }, () => true)).toBe(true);
      expect(sha(readFileSync(await store.materialize("ck-r.qcow2", sha(b))))).toBe(sha(b));
      await store.delete("ck-r.qcow2");
    });

    it("rejects keys that could escape the store", async () => {
      const { store } = await make();
      await expect(store.stat("../etc/passwd")).rejects.toThrow(/invalid blob key/);
      await expect(store.delete("a/b")).rejects.toThrow(/invalid blob key/);
    });
  });
}
