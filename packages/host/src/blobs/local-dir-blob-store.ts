import { mkdirSync } from "node:fs";
import { open, readdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { sha256File } from "../disks/layers.js";
import { renameKeepingGrants } from "../vmm/jail.js";
import { assertBlobKey, BlobCorruptError, BlobMissingError, type BlobStore } from "./blob-store.js";

/**
 * Blobs as files in one directory. Verified hashes are remembered per (inode, size, mtime, ctime), so
 * a layer shared by many forks is hashed once, while any rewrite of the file is hashed again.
 */
export class LocalDirBlobStore implements BlobStore {
  private readonly verified = new Map<string, string>();

  constructor(readonly localDir: string) {
    mkdirSync(localDir, { recursive: true });
  }

  private file(key: string): string {
    assertBlobKey(key);
    return path.join(this.localDir, key);
  }

  async put(key: string, file: string, meta: { sha256: string; size: number }): Promise<void> {
    const dest = this.file(key);
    // Over a layer VMs may be granted (a flattening swaps it in): their grants come along.
    if (path.resolve(file) !== dest) await renameKeepingGrants(file, dest);
    const dir = await open(this.localDir, "r");
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    const st = await stat(dest);
    this.verified.set(`${key}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`, meta.sha256);
  }

  async replace(
    key: string,
    file: string,
    meta: { sha256: string; size: number },
    commit: () => boolean | Promise<boolean>,
  ): Promise<boolean> {
    this.file(key);
    if (!(await commit())) {
      await rm(file, { force: true });
      return false;
    }
    await this.put(key, file, meta);
    return true;
  }

  async materialize(key: string, expectedSha256: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
    const file = this.file(key);
    let st: Awaited<ReturnType<typeof stat>>;
    try {
      st = await stat(file);
    } catch {
      throw new BlobMissingError(key);
    }
    const cacheKey = `${key}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    if (this.verified.get(cacheKey) === expectedSha256) return file;
    const actual = await sha256File(file, opts);
    if (actual !== expectedSha256) throw new BlobCorruptError(key, expectedSha256, actual);
    this.verified.set(cacheKey, actual);
    return file;
  }

  async delete(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
    for (const k of this.verified.keys()) if (k.startsWith(`${key}:`)) this.verified.delete(k);
  }

  async stat(key: string): Promise<{ size: number } | null> {
    const file = this.file(key);
    try {
      return { size: (await stat(file)).size };
    } catch {
      return null;
    }
  }

  async list(): Promise<string[]> {
    return (await readdir(this.localDir)).filter((n) => !n.startsWith(".") && !n.startsWith("base-"));
  }
}
