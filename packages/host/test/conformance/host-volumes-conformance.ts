// The volumes port's conformance suite (MachineHost.volumes, HostVolumes): what VolumeService and
// the fleet's volume moves rely on, through the port only, for every host (fake, QEMU, and each
// behind a remote worker). No machine is started: a volume's storage is the host's own.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore, HostVolumes, MachineHost } from "../../src/index.js";
import { layerBlobs } from "./layer-blobs.js";

export interface VolumesUnderTest {
  volumes: HostVolumes;
  /** The blob store its archives port packs into (a remote host's worker's own). */
  blobs: BlobStore;
  close(): Promise<void>;
}

const MiB = 1024 * 1024;

async function* body(...parts: Array<string | Uint8Array>): AsyncIterable<Uint8Array> {
  for (const p of parts) yield typeof p === "string" ? Buffer.from(p) : p;
}

async function readAll(v: HostVolumes, name: string, p: string, o: { offset?: number; length?: number } = {}) {
  const { size, chunks } = await v.read(name, p, o);
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return { size, text: Buffer.concat(parts).toString() };
}

const roomy = { limitBytes: 64 * MiB, usedBytes: 0 };

export function hostVolumesConformance(name: string, make: () => Promise<VolumesUnderTest>): void {
  describe(`HostVolumes conformance: ${name}`, () => {
    let t: VolumesUnderTest;
    let v: HostVolumes;
    beforeAll(async () => {
      t = await make();
      v = t.volumes;
    });
    afterAll(async () => {
      await t?.close();
    });

    it("makes a volume, writes (parents made), reads it whole and a range, stats, lists and measures it", async () => {
      await v.create("conf-a", 1);
      // Asked again (a create a stopped server resumes): the same volume, nothing lost.
      const w = await v.write("conf-a", "/dir/sub/f.txt", body("hello ", "volume"), { ...roomy, mode: 0o600 });
      expect(w).toEqual({ path: "/dir/sub/f.txt", bytes: 12, replaced: 0 });
      await v.create("conf-a", 1);
      expect(await readAll(v, "conf-a", "dir/sub/f.txt")).toEqual({ size: 12, text: "hello volume" });
      expect(await readAll(v, "conf-a", "/dir/sub/f.txt", { offset: 6, length: 3 })).toEqual({ size: 3, text: "vol" });
      expect(await v.stat("conf-a", "/dir/sub/f.txt")).toMatchObject({
        path: "/dir/sub/f.txt",
        type: "file",
        size: 12,
        mode: 0o600,
      });
      expect(await v.mkdir("conf-a", "/dir/empty", { parents: false, mode: 0o755 })).toMatchObject({ type: "dir" });
      const list = await v.list("conf-a", "/dir");
      expect(list.path).toBe("/dir");
      expect(list.entries.map((e) => [e.name, e.type])).toEqual([
        ["empty", "dir"],
        ["sub", "dir"],
      ]);
      expect(await v.usedBytes("conf-a")).toBe(12);
    });

    it("streams a large file both ways; a write over a file says what it replaced", async () => {
      await v.create("conf-big", 1);
      const chunk = new Uint8Array(256 * 1024).fill(7);
      const w = await v.write("conf-big", "/big", body(chunk, chunk, chunk, chunk), roomy);
      expect(w.bytes).toBe(MiB);
      const { size, chunks } = await v.read("conf-big", "/big");
      let n = 0;
      for await (const c of chunks) n += c.byteLength;
      expect([size, n]).toEqual([MiB, MiB]);
      expect(await v.write("conf-big", "/big", body("small"), { ...roomy, usedBytes: MiB })).toEqual({
        path: "/big",
        bytes: 5,
        replaced: MiB,
      });
      expect(await v.usedBytes("conf-big")).toBe(5);
    });

    it("refuses a write past the volume's size with VOLUME_FULL and keeps the old file", async () => {
      await v.create("conf-full", 1);
      await v.write("conf-full", "/f", body("old"), roomy);
      // 10 bytes allowed, 7 of them held by another file: the old 3 are replaced, so 10 more do not fit.
      const o = { limitBytes: 10, usedBytes: 10 };
      await expect(v.write("conf-full", "/f", body("0123456789"), o)).rejects.toMatchObject({ code: "VOLUME_FULL" });
      expect(await readAll(v, "conf-full", "/f")).toEqual({ size: 3, text: "old" });
      expect((await v.list("conf-full", "/")).entries.map((e) => e.name)).toEqual(["f"]);
    });

    it("gives each refusal the details the API answers with (VOLUME_FULL's limit, the path, the field)", async () => {
      await v.create("conf-details", 1);
      await expect(v.write("conf-details", "/big", body("0123456789"), { limitBytes: 4, usedBytes: 0 })).rejects.toMatchObject({
        code: "VOLUME_FULL",
        details: { path: "/big", volume: "conf-details", limit_bytes: 4 },
      });
      await expect(v.stat("conf-details", "/nope")).rejects.toMatchObject({ code: "FILE_NOT_FOUND", details: { path: "/nope" } });
      await v.write("conf-details", "/d/f", body("x"), roomy);
      await expect(v.read("conf-details", "/d")).rejects.toMatchObject({ code: "IS_A_DIRECTORY", details: { path: "/d" } });
      await expect(v.stat("../x", "/")).rejects.toMatchObject({ code: "VALIDATION_FAILED", details: { field: "volume" } });
    });

    it("answers FILE_NOT_FOUND for a path not there, and removes files and trees", async () => {
      await v.create("conf-rm", 1);
      for (const call of [
        () => v.stat("conf-rm", "/nope"),
        () => v.read("conf-rm", "/nope"),
        () => v.list("conf-rm", "/nope"),
        () => v.removePath("conf-rm", "/nope", { recursive: false }),
      ]) {
        await expect(call()).rejects.toMatchObject({ code: "FILE_NOT_FOUND" });
      }
      await v.write("conf-rm", "/t/a/b", body("x"), roomy);
      await expect(v.removePath("conf-rm", "/t", { recursive: false })).rejects.toMatchObject({ code: "DIRECTORY_NOT_EMPTY" });
      await v.removePath("conf-rm", "/t", { recursive: true });
      expect((await v.list("conf-rm", "/")).entries).toEqual([]);
      await expect(v.read("conf-rm", "../escape")).rejects.toMatchObject({ code: "INVALID_PATH" });
    });

    it("refuses a volume named by a path (not a name in its volumes directory) with VALIDATION_FAILED", async () => {
      for (const bad of ["../x", "a/b", ".hidden", "/abs"]) {
        await expect(v.create(bad, 1), bad).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(v.stat(bad, "/"), bad).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(v.write(bad, "/f", body("x"), roomy), bad).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(v.remove(bad), bad).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
      }
    });

    it("removes a volume's storage, once or twice; made again it is empty", async () => {
      await v.create("conf-gone", 1);
      await v.write("conf-gone", "/f", body("x"), roomy);
      await v.remove("conf-gone");
      await v.remove("conf-gone");
      await v.remove("conf-never-made");
      await v.create("conf-gone", 1);
      expect((await v.list("conf-gone", "/")).entries).toEqual([]);
    });

    it("snapshots a volume into a new one: the same files, each written on its own after", async () => {
      await v.create("conf-src", 1);
      await v.write("conf-src", "/d/f", body("before"), roomy);
      await v.snapshot("conf-src", "conf-snap", 1);
      await v.write("conf-src", "/d/f", body("after"), roomy);
      expect((await readAll(v, "conf-snap", "/d/f")).text).toBe("before");
      expect((await readAll(v, "conf-src", "/d/f")).text).toBe("after");
    });

    it("packs a volume into the blob store and unpacks it as another, replacing what that one held", async () => {
      await v.create("conf-pack", 1);
      await v.write("conf-pack", "/a/b.txt", body("packed"), roomy);
      const archives = v.archives(t.blobs);
      const packed = await archives.store("conf-pack", `volume-conf-pack-${Date.now()}.tar`);
      expect(packed).toMatchObject({ sha256: expect.stringMatching(/^[0-9a-f]{64}$/), size: expect.any(Number) });
      const synced = await archives.store("conf-pack", `volume-conf-sync-${Date.now()}.tar`, { snapshot: true, sizeGb: 1 });
      await v.create("conf-unpacked", 1);
      await v.write("conf-unpacked", "/stale", body("x"), roomy);
      await archives.fetch(packed, "conf-unpacked", 1);
      expect((await v.list("conf-unpacked", "/")).entries.map((e) => e.name)).toEqual(["a"]);
      expect((await readAll(v, "conf-unpacked", "/a/b.txt")).text).toBe("packed");
      // A volume not here yet is made by the unpack.
      await archives.fetch(synced, "conf-arrived", 1);
      expect((await readAll(v, "conf-arrived", "/a/b.txt")).text).toBe("packed");
    });
  });
}

/**
 * The suite against the volumes of `hostOf(dir)` (its volumes directory in `dir`), itself or
 * behind `wrap` (a remote host over a worker serving it), its archives over a blob store whose
 * local cache lies in `dir` too.
 */
export function volumesOfHost(
  name: string,
  hostOf: (dir: string) => MachineHost,
  wrap: (host: MachineHost, blobs: BlobStore) => Promise<{ host: MachineHost; close: () => Promise<void> }> = async (host) => ({
    host,
    close: async () => {},
  }),
): void {
  hostVolumesConformance(name, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-volumes-conf-"));
    const store = await layerBlobs(path.join(dir, "layers"));
    const { host, close } = await wrap(hostOf(dir), store.blobs);
    return {
      volumes: host.volumes,
      blobs: store.blobs,
      close: async () => {
        await close();
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
}
