import { mkdirSync, type Stats } from "node:fs";
import { open, readdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { sha256File } from "../disks/layers.js";
import { unchangedSince } from "../util/own-metadata-edits.js";
import { renameKeepingGrants } from "../vmm/jail.js";
import { assertBlobKey, BlobCorruptError, BlobMissingError, type BlobStore } from "./blob-store.js";

interface Verified {
  sha256: string;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

/**
 * Blobs as files in one directory. Verified hashes are remembered with the file's inode, size,
 * mtime and ctime, so a layer shared by many forks is hashed once, while any rewrite of the file
 * is hashed again; this process's own ACL grants on it (a ctime change) are not a rewrite.
 */
export class LocalDirBlobStore implements BlobStore {
  private readonly verified = new Map<string, Verified>();

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
    this.remember(key, meta.sha256, await stat(dest));
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
    let st: Stats;
    try {
      st = await stat(file);
    } catch {
      throw new BlobMissingError(key);
    }
    const known = this.verified.get(key);
    if (known?.sha256 === expectedSha256 && unchangedSince(file, known, st)) return file;
    const actual = await sha256File(file, opts);
    if (actual !== expectedSha256) throw new BlobCorruptError(key, expectedSha256, actual);
    this.remember(key, actual, st);
    return file;
  }

  private remember(key: string, sha256: string, st: Stats): void {
    this.verified.set(key, { sha256, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs });
  }

  async delete(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
    this.verified.delete(key);
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
