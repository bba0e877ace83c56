import { execFileSync } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { BlobCorruptError, LocalDirBlobStore, sha256File } from "../src/index.js";
import { defaultJailConfig, JailLease } from "../src/qemu.js";

// A restore checks every layer of its chain against its recorded hash and remembers what it
// checked (by inode, size, mtime and ctime). Each VM's grant on its chain (an ACL entry) changes
// the files' ctime: that must not make the next fork hash the whole chain again, while a byte
// changed in place with its mtime put back must still be found. Needs root (the jail); no VM.

const hashed = vi.hoisted(() => ({ count: 0 }));
vi.mock("../src/disks/layers.js", async (importOriginal) => {
  const m = await importOriginal<typeof import("../src/disks/layers.js")>();
  return {
    ...m,
    sha256File: (...args: Parameters<typeof m.sha256File>) => {
      hashed.count++;
      return m.sha256File(...args);
    },
  };
});

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-verified-grants-"));
chmodSync(dir, 0o711);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const jail = defaultJailConfig();

describe.skipIf(!jail.enabled)("a verified layer", () => {
  it("stays verified across this process's grants and revocations, not across other changes", async () => {
    const store = new LocalDirBlobStore(path.join(dir, "layers"));
    const src = path.join(dir, "src");
    writeFileSync(src, Buffer.alloc(1 << 20, 7), { mode: 0o600 });
    const sha256 = await sha256File(src);
    await store.put("layer-v", src, { sha256, size: 1 << 20 });
    hashed.count = 0;
    const file = await store.materialize("layer-v", sha256);
    expect(hashed.count).toBe(0);

    const lease = (await JailLease.acquire(jail, "verified-grants")) as JailLease;
    const ctime = statSync(file).ctimeMs;
    try {
      await lease.allow([{ files: [file], perm: "r" }]);
      expect(statSync(file).ctimeMs).not.toBe(ctime);
      await store.materialize("layer-v", sha256);
      expect(hashed.count, "hashed again after a grant").toBe(0);
    } finally {
      await lease.release();
    }
    await store.materialize("layer-v", sha256);
    expect(hashed.count, "hashed again after a revocation").toBe(0);

    // A metadata change this process did not make: hashed again (and still whole).
    chmodSync(file, 0o640);
    await store.materialize("layer-v", sha256);
    expect(hashed.count).toBe(1);

    // One byte flipped in place, mtime put back to the nanosecond: found.
    const st = statSync(file, { bigint: true });
    const fd = openSync(file, "r+");
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, 4096);
    b[0] = (b[0] as number) ^ 0xff;
    writeSync(fd, b, 0, 1, 4096);
    closeSync(fd);
    const ns = st.mtimeNs;
    execFileSync("touch", ["-m", "-d", `@${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, "0")}`, file]);
    expect(statSync(file, { bigint: true }).mtimeNs).toBe(ns);
    await expect(store.materialize("layer-v", sha256)).rejects.toBeInstanceOf(BlobCorruptError);
  });
});
