// The volume file layer without a server: a host out of disk and a broken upload leave nothing
// behind, and the errno of each refusal maps to the API's code.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VolumeFiles } from "../src/volumes/volume-files.js";
import { components, fsError } from "../src/volumes/volume-fs.js";

let root: string;
/** A 1 MiB tmpfs: a host disk that fills (mounted as root, as reliability-faults mounts its loop disk). */
let small: string;
beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), "sandtree-volume-fs-"));
  small = path.join(root, "small");
  mkdirSync(small);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", small]);
});
afterAll(() => {
  try {
    if (small) execFileSync("umount", [small]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

const budget = { volumeId: "vol-test", limitBytes: 1 << 20, usedOthers: () => 0 };

async function* once(chunk: Uint8Array): AsyncIterable<Uint8Array> {
  yield chunk;
}

async function* failing(code: string): AsyncIterable<Uint8Array> {
  yield new Uint8Array(10);
  throw Object.assign(new Error(`write: ${code}`), { code });
}

describe("volume-fs", () => {
  it("maps errnos to the API's codes (ENOSPC and EDQUOT: HOST_DISK_FULL)", () => {
    const code = (errno: string) => (fsError(Object.assign(new Error(errno), { code: errno }), "/p") as { code?: string }).code;
    expect(["ENOSPC", "EDQUOT", "ENOENT", "ENOTDIR", "EEXIST", "ENOTEMPTY"].map(code)).toEqual([
      "HOST_DISK_FULL",
      "HOST_DISK_FULL",
      "FILE_NOT_FOUND",
      "NOT_A_DIRECTORY",
      "ALREADY_EXISTS",
      "DIRECTORY_NOT_EMPTY",
    ]);
    expect(components("/a//./b/")).toEqual(["a", "b"]);
    expect(() => components("a/../b")).toThrow(/'\.\.' is not allowed/);
  });

  it("a host disk that fills during an upload refuses it with HOST_DISK_FULL and keeps nothing of it", async () => {
    const vol = path.join(small, "vol");
    mkdirSync(vol);
    writeFileSync(path.join(vol, "filler"), new Uint8Array(700 * 1024));
    const files = new VolumeFiles(vol);
    const chunks = (async function* () {
      for (let i = 0; i < 8; i++) yield new Uint8Array(64 * 1024);
    })();
    await expect(files.upload("/big", chunks, 0o644, { ...budget, limitBytes: 1 << 30 })).rejects.toMatchObject({
      code: "HOST_DISK_FULL",
    });
    expect(readdirSync(vol)).toEqual(["filler"]);
    // Room again: the same upload goes through.
    rmSync(path.join(vol, "filler"));
    await files.upload("/big", once(new Uint8Array(512 * 1024)), 0o644, { ...budget, limitBytes: 1 << 30 });
    expect(readdirSync(vol)).toEqual(["big"]);
  });

  it("a write failing with ENOSPC mid-body (or a body that breaks) leaves the old file and no partial one", async () => {
    const plain = path.join(root, "plain");
    mkdirSync(plain);
    const files = new VolumeFiles(plain);
    await files.upload("/f", once(new Uint8Array([1, 2, 3])), 0o644, budget);
    await expect(files.upload("/f", failing("ENOSPC"), 0o644, budget)).rejects.toMatchObject({ code: "HOST_DISK_FULL" });
    await expect(files.upload("/g", failing("ECONNRESET"), 0o644, budget)).rejects.toThrow(/ECONNRESET/);
    expect(readdirSync(plain)).toEqual(["f"]);
    expect([...readFileSync(path.join(plain, "f"))]).toEqual([1, 2, 3]);
    writeFileSync(path.join(plain, "big"), new Uint8Array(100));
    expect(await files.usedBytes()).toBe(103);
  });
});
