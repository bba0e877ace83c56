import { randomBytes } from "node:crypto";
import { constants as C, createReadStream } from "node:fs";
import { type FileHandle, lstat, mkdir, readdir, readlink, rename, rmdir, unlink } from "node:fs/promises";
import { type FileList, type FileStat, SandtreeError } from "@sandtree/protocol";
import {
  at,
  components,
  fsError,
  openDirAt,
  openFileAt,
  openRoot,
  shown,
  statAt,
  toFileStat,
  unsafe,
  walk,
} from "./volume-fs.js";

/** Names of uploads in flight (renamed over their target once complete, removed on failure). */
const TMP_PREFIX = ".sandtree-upload-";

/** What bounds an upload: bytes the volume may still take, counted as the body streams. */
export interface WriteBudget {
  /** Bytes the volume holds now, this file's current bytes excluded. */
  usedOthers(existing: number): number;
  limitBytes: number;
  volumeId: string;
}

async function withDir<T>(
  root: string,
  parts: readonly string[],
  p: string,
  fn: (dir: FileHandle) => Promise<T>,
  create = false,
): Promise<T> {
  const r = await openRoot(root);
  try {
    const dir = create && parts.length > 0 ? await makeDirs(r, parts, p, 0o755, true) : await walk(r, parts, p);
    try {
      return await fn(dir);
    } finally {
      if (dir !== r) await dir.close();
    }
  } finally {
    await r.close();
  }
}

/** A path's parent components and leaf name; the root has no leaf. */
function split(p: string): { parts: string[]; parent: string[]; leaf: string | undefined; shownPath: string } {
  const parts = components(p);
  return { parts, parent: parts.slice(0, -1), leaf: parts.at(-1), shownPath: shown(parts) };
}

/** The file operations of one volume's directory, safe against what its sandboxes put there (volume-fs.ts). */
export class VolumeFiles {
  constructor(private readonly root: string) {}

  async stat(p: string): Promise<FileStat> {
    const { parent, leaf, shownPath } = split(p);
    return withDir(this.root, parent, shownPath, async (dir) => {
      const st = await statAt(dir, leaf ?? ".", shownPath);
      return toFileStat(shownPath, st, leaf, st.isSymbolicLink() ? await readlink(at(dir.fd, leaf ?? ".")) : undefined);
    });
  }

  async list(p: string): Promise<FileList> {
    const { parts, shownPath } = split(p);
    return withDir(this.root, parts, shownPath, async (dir) => {
      const names = await readdir(at(dir.fd)).catch((err) => Promise.reject(fsError(err, shownPath)));
      const entries: FileStat[] = [];
      for (const name of names.sort()) {
        if (name.startsWith(TMP_PREFIX)) continue;
        const st = await lstat(at(dir.fd, name)).catch(() => null);
        if (!st) continue;
        const target = st.isSymbolicLink() ? await readlink(at(dir.fd, name)).catch(() => "") : undefined;
        entries.push(toFileStat(shown([...parts, name]), st, name, target));
      }
      return { path: shownPath, entries };
    });
  }

  /** The file's bytes from `offset` (at most `length`): checked to be a regular file before any byte is sent. */
  async download(
    p: string,
    opts: { offset?: number; length?: number },
  ): Promise<{ size: number; chunks: AsyncIterable<Uint8Array> }> {
    const { parent, leaf, shownPath } = split(p);
    if (leaf === undefined) throw new SandtreeError("IS_A_DIRECTORY", "/ is a directory", { path: "/" });
    const fh = await withDir(this.root, parent, shownPath, (dir) => openFileAt(dir, leaf, C.O_RDONLY, shownPath));
    try {
      const st = await fh.stat();
      const offset = opts.offset ?? 0;
      const size = Math.max(0, Math.min(st.size - offset, opts.length ?? Number.POSITIVE_INFINITY));
      if (size === 0) {
        await fh.close();
        return { size, chunks: (async function* () {})() };
      }
      const stream = createReadStream("", { fd: fh, start: offset, end: offset + size - 1, autoClose: true });
      return { size, chunks: stream };
    } catch (err) {
      await fh.close().catch(() => {});
      throw err;
    }
  }

  /**
   * Streams the body into a new file beside the target, then renames it over the target: a
   * refused or failed write (past the volume's size, the host's disk full, a broken upload)
   * leaves the target as it was and no partial file.
   */
  async upload(
    p: string,
    body: AsyncIterable<Uint8Array>,
    mode: number,
    budget: WriteBudget,
  ): Promise<{ path: string; bytes: number }> {
    const { parent, leaf, shownPath } = split(p);
    if (leaf === undefined) throw new SandtreeError("IS_A_DIRECTORY", "/ is a directory", { path: "/" });
    // Parents are created, as for a sandbox's files.
    return withDir(
      this.root,
      parent,
      shownPath,
      async (dir) => {
        const existing = await lstat(at(dir.fd, leaf)).catch(() => null);
        if (existing?.isDirectory())
          throw new SandtreeError("IS_A_DIRECTORY", `${shownPath} is a directory`, { path: shownPath });
        if (existing && !existing.isFile()) throw unsafe(shownPath, existing);
        const allowed = budget.limitBytes - budget.usedOthers(existing?.size ?? 0);
        const tmp = `${TMP_PREFIX}${randomBytes(8).toString("hex")}`;
        const fh = await openFileAt(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, shownPath, mode);
        let bytes = 0;
        try {
          for await (const chunk of body) {
            bytes += chunk.byteLength;
            if (bytes > allowed) {
              throw new SandtreeError(
                "VOLUME_FULL",
                `${shownPath}: the write would take volume ${budget.volumeId} past its size`,
                {
                  path: shownPath,
                  volume: budget.volumeId,
                  limit_bytes: budget.limitBytes,
                },
              );
            }
            await fh.write(chunk);
          }
          await fh.chmod(mode);
          await fh.sync();
          await fh.close();
          await rename(at(dir.fd, tmp), at(dir.fd, leaf));
        } catch (err) {
          await fh.close().catch(() => {});
          await unlink(at(dir.fd, tmp)).catch(() => {});
          throw fsError(err, shownPath);
        }
        return { path: shownPath, bytes };
      },
      true,
    );
  }

  async mkdir(p: string, parents: boolean, mode: number): Promise<FileStat> {
    const { parts, shownPath } = split(p);
    if (parts.length === 0) return this.stat("/");
    const r = await openRoot(this.root);
    try {
      const dir = await makeDirs(r, parts, shownPath, mode, parents);
      try {
        return toFileStat(shownPath, await dir.stat(), parts.at(-1));
      } finally {
        await dir.close();
      }
    } finally {
      await r.close();
    }
  }

  /** Removes a file, a symlink or device (the entry itself), or a directory (with `recursive`, its tree). */
  async remove(p: string, recursive: boolean): Promise<void> {
    const { parent, leaf, shownPath } = split(p);
    if (leaf === undefined) throw new SandtreeError("INVALID_PATH", "refusing to remove /", { path: "/" });
    await withDir(this.root, parent, shownPath, async (dir) => {
      const st = await statAt(dir, leaf, shownPath);
      try {
        if (!st.isDirectory()) await unlink(at(dir.fd, leaf));
        else if (recursive) await removeTree(dir, leaf, shownPath);
        else await rmdir(at(dir.fd, leaf));
      } catch (err) {
        throw fsError(err, shownPath);
      }
    });
  }

  /** Bytes of the regular files under the root (apparent sizes: what size_gb bounds). */
  async usedBytes(): Promise<number> {
    const r = await openRoot(this.root);
    try {
      return await treeBytes(r);
    } finally {
      await r.close();
    }
  }
}

/** Removes the directory `name` in `dir` and its tree, each level opened O_NOFOLLOW from its parent. */
/**
 * Makes each directory of `parts` that is missing (mkdirat from its parent's descriptor) and
 * answers the last one open. An existing last one is ALREADY_EXISTS unless `parents` (mkdir -p).
 */
async function makeDirs(
  root: FileHandle,
  parts: readonly string[],
  p: string,
  mode: number,
  parents: boolean,
): Promise<FileHandle> {
  let dir = root;
  try {
    for (const [i, name] of parts.entries()) {
      try {
        await mkdir(at(dir.fd, name), mode);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST" || (i === parts.length - 1 && !parents)) throw fsError(err, p);
      }
      const next = await openDirAt(dir, name, p);
      if (dir !== root) await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    if (dir !== root) await dir.close();
    throw err;
  }
}

async function removeTree(dir: FileHandle, name: string, p: string): Promise<void> {
  const sub = await openDirAt(dir, name, p);
  try {
    for (const child of await readdir(at(sub.fd))) {
      const st = await lstat(at(sub.fd, child)).catch(() => null);
      if (!st) continue;
      if (st.isDirectory()) await removeTree(sub, child, `${p}/${child}`);
      else await unlink(at(sub.fd, child)).catch((err) => (err.code === "ENOENT" ? undefined : Promise.reject(err)));
    }
  } finally {
    await sub.close();
  }
  await rmdir(at(dir.fd, name));
}

async function treeBytes(dir: FileHandle): Promise<number> {
  let total = 0;
  for (const child of await readdir(at(dir.fd)).catch(() => [] as string[])) {
    const st = await lstat(at(dir.fd, child)).catch(() => null);
    if (!st) continue;
    if (st.isFile()) total += st.size;
    else if (st.isDirectory()) {
      const sub = await openDirAt(dir, child, child).catch(() => null);
      if (!sub) continue;
      try {
        total += await treeBytes(sub);
      } finally {
        await sub.close();
      }
    }
  }
  return total;
}
