import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BlobCorruptError, BlobMissingError, type BlobStore } from "../src/index.js";

/** Every BlobStore implementation must pass this suite (local directory now, S3 later). */
export function blobStoreConformance(name: string, make: () => Promise<{ store: BlobStore; scratch: string }>): void {
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
      const { store, scratch } = await make();
      const data = randomBytes(100_000);
      await store.put("ck-b.qcow2", stage(scratch, data), { sha256: sha(data), size: data.length });
      await store.materialize("ck-b.qcow2", sha(data));
      appendFileSync(path.join(store.localDir, "ck-b.qcow2"), "x");
      await expect(store.materialize("ck-b.qcow2", sha(data))).rejects.toBeInstanceOf(BlobCorruptError);
      await expect(store.materialize("ck-none.qcow2", sha(data))).rejects.toBeInstanceOf(BlobMissingError);
    });

    it("rejects keys that could escape the store", async () => {
      const { store } = await make();
      await expect(store.stat("../etc/passwd")).rejects.toThrow(/invalid blob key/);
      await expect(store.delete("a/b")).rejects.toThrow(/invalid blob key/);
    });
  });
}
