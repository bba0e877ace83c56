import { open, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { unchangedSince } from "../util/own-metadata-edits.js";

interface Mark {
  sha256: string;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

/**
 * Remembers which local cache files were verified against which sha256, in a small marker file
 * beside each (`.verified-KEY`), so a large layer is hashed once, not at every restore, and not
 * again after a restart. A marker holds only while the file's inode, size, mtime and ctime are
 * unchanged, but for this process's own ACL grants on it (own-metadata-edits.ts): any rewrite or
 * replacement of the file makes it hashed again.
 */
export class VerifiedCache {
  constructor(private readonly dir: string) {}

  private marker(key: string): string {
    return path.join(this.dir, `.verified-${key}`);
  }

  /** Whether `key`'s local file is known to hash to `sha256`. */
  async holds(key: string, sha256: string): Promise<boolean> {
    try {
      const [text, st] = await Promise.all([readFile(this.marker(key), "utf8"), stat(path.join(this.dir, key))]);
      const m = JSON.parse(text) as Mark;
      return m.sha256 === sha256 && unchangedSince(path.join(this.dir, key), m, st);
    } catch {
      return false;
    }
  }

  /** Records that `key`'s local file, as it is now, hashes to `sha256`. */
  async mark(key: string, sha256: string): Promise<void> {
    const st = await stat(path.join(this.dir, key));
    const m: Mark = { sha256, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
    await writeFile(this.marker(key), JSON.stringify(m));
  }

  async forget(key: string): Promise<void> {
    await rm(this.marker(key), { force: true });
  }
}

/** fsyncs a directory, so a rename into it survives a crash. */
export async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, "r");
  try {
    await fd.sync();
  } finally {
    await fd.close();
  }
}
