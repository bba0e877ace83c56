import { type Stats, statSync } from "node:fs";
import path from "node:path";

/**
 * The ctime changes this process made itself by editing files' metadata only (the jail's ACL
 * grants on layers), so a cache that keyed a verified hash on a file's ctime can tell them from a
 * rewrite. A rewrite in place with its mtime put back changes the ctime too, and only that: the
 * caches hash such a file again (reliability-faults.test). Without this, every VM's grant on its
 * backing chain made the next restore hash the whole chain again, on the path of a fork.
 */

interface Edits {
  ino: number;
  size: number;
  mtimeMs: number;
  /** ctime after an edit -> ctime before it. */
  before: Map<number, number>;
}

const MAX_FILES = 20_000;
const MAX_EDITS_PER_FILE = 512;
const edits = new Map<string, Edits>();

function statOf(file: string): Stats | null {
  try {
    return statSync(file);
  } catch {
    return null;
  }
}

/**
 * Runs `edit`, which changes only the metadata of `files` (an ACL entry, an owner), and records
 * each file's ctime before and after it. A file whose inode, size or mtime changed meanwhile is
 * not recorded: its content may have changed too.
 */
export async function editMetadata<T>(files: string[], edit: () => Promise<T>): Promise<T> {
  const abs = files.map((f) => path.resolve(f));
  const before = abs.map(statOf);
  try {
    return await edit();
  } finally {
    abs.forEach((file, i) => {
      const was = before[i];
      const now = statOf(file);
      if (!was || !now || now.ctimeMs === was.ctimeMs) return;
      if (now.ino !== was.ino || now.size !== was.size || now.mtimeMs !== was.mtimeMs) return;
      let e = edits.get(file);
      if (!e || e.ino !== now.ino || e.size !== now.size || e.mtimeMs !== now.mtimeMs) {
        if (edits.size >= MAX_FILES) edits.clear();
        e = { ino: now.ino, size: now.size, mtimeMs: now.mtimeMs, before: new Map() };
        edits.set(file, e);
      }
      if (e.before.size >= MAX_EDITS_PER_FILE) e.before.clear();
      e.before.set(now.ctimeMs, was.ctimeMs);
    });
  }
}

/**
 * Whether `file`, as `now` describes it, has the content it had when it was marked (inode, size,
 * mtime and ctime then): the same stat, or one whose ctime differs only by this process's own
 * metadata edits since.
 */
export function unchangedSince(
  file: string,
  marked: { ino: number; size: number; mtimeMs: number; ctimeMs: number },
  now: Pick<Stats, "ino" | "size" | "mtimeMs" | "ctimeMs">,
): boolean {
  if (marked.ino !== now.ino || marked.size !== now.size || marked.mtimeMs !== now.mtimeMs) return false;
  if (marked.ctimeMs === now.ctimeMs) return true;
  const e = edits.get(path.resolve(file));
  if (!e || e.ino !== now.ino || e.size !== now.size || e.mtimeMs !== now.mtimeMs) return false;
  let c: number | undefined = now.ctimeMs;
  for (let i = 0; c !== undefined && i <= MAX_EDITS_PER_FILE; i++) {
    if (c === marked.ctimeMs) return true;
    c = e.before.get(c);
  }
  return false;
}
