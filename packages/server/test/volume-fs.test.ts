// The volume file layer without a server: a host out of disk and a broken upload leave nothing
// behind, and the errno of each refusal maps to the API's code.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VolumeFiles } from "../src/services/volumes/volume-files.js";
import { components, fsError } from "../src/services/volumes/volume-fs.js";

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), "sandtree-volume-fs-"));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
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

  it("a write failing with ENOSPC mid-body (or a body that breaks) leaves the old file and no partial one", async () => {
    const files = new VolumeFiles(root);
    await files.upload("/f", once(new Uint8Array([1, 2, 3])), 0o644, budget);
    await expect(files.upload("/f", failing("ENOSPC"), 0o644, budget)).rejects.toMatchObject({ code: "HOST_DISK_FULL" });
    await expect(files.upload("/g", failing("ECONNRESET"), 0o644, budget)).rejects.toThrow(/ECONNRESET/);
    expect(readdirSync(root)).toEqual(["f"]);
    expect([...readFileSync(path.join(root, "f"))]).toEqual([1, 2, 3]);
    writeFileSync(path.join(root, "big"), new Uint8Array(100));
    expect(await files.usedBytes()).toBe(103);
  });
});
