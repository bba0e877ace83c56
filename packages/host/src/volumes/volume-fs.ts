import { constants as C, type Stats } from "node:fs";
import { type FileHandle, lstat, open } from "node:fs/promises";
import { type FileStat, SandtreeError } from "@sandtree/protocol";

// Every file operation of the volume file API walks from the volume's root one component at a
// time, each directory opened with O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor
// (`/proc/self/fd/N/name`: the kernel resolves the magic link to the open directory itself, so
// this is openat(2) without a native binding). A symlink anywhere on the path is never followed,
// whatever a guest writes into the volume or swaps in concurrently: a component checked and then
// replaced is not reopened by name. Leaves are opened O_NOFOLLOW|O_NONBLOCK (a fifo never blocks
// the open) and checked with fstat on the descriptor before a byte is read or written.

/** The path of `name` in the directory open as `fd` (or the directory itself). */
export function at(fd: number, name?: string): string {
  return name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;
}

/**
 * A volume path's components ("/" and "" are the root). Absolute and relative paths both name
 * files inside the volume; `..` is refused rather than clamped (it is how escapes are asked for).
 */
export function components(p: string): string[] {
  if (p.includes("\0")) throw new SandtreeError("INVALID_PATH", "path must not contain NUL", { path: p });
  const parts = p.split("/").filter((c) => c !== "" && c !== ".");
  if (parts.includes("..")) throw new SandtreeError("INVALID_PATH", `${p}: '..' is not allowed in a volume path`, { path: p });
  for (const c of parts) {
    if (Buffer.byteLength(c) > 255) throw new SandtreeError("INVALID_PATH", `${p}: a name is longer than 255 bytes`, { path: p });
  }
  return parts;
}

/** The canonical form shown back to the caller: "/a/b". */
export const shown = (parts: readonly string[]) => `/${parts.join("/")}`;

function kindOf(st: Stats): string {
  if (st.isSymbolicLink()) return "a symlink";
  if (st.isFIFO()) return "a fifo";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device file";
  // A directory here was something else a moment before (the path changed while it was opened).
  if (st.isDirectory()) return "a path that changed while it was opened";
  return "not a regular file";
}

export function unsafe(p: string, what: Stats | string): SandtreeError {
  const kind = typeof what === "string" ? what : kindOf(what);
  return new SandtreeError("UNSAFE_PATH", `${p} is ${kind}: the volume file API never follows or opens one`, {
    path: p,
    kind: kind.replace(/^an? /, ""),
  });
}

/** An fs error on `p` as the API's (the same codes as sandbox files). */
export function fsError(err: unknown, p: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  const map: Record<string, [Parameters<typeof mk>[0], string]> = {
    ENOENT: ["FILE_NOT_FOUND", "No such file or directory"],
    ENOTDIR: ["NOT_A_DIRECTORY", "Not a directory"],
    EISDIR: ["IS_A_DIRECTORY", "Is a directory"],
    EEXIST: ["ALREADY_EXISTS", "File exists"],
    ENOTEMPTY: ["DIRECTORY_NOT_EMPTY", "Directory not empty"],
    ENOSPC: ["HOST_DISK_FULL", "the host's disk is full: nothing was written"],
    EDQUOT: ["HOST_DISK_FULL", "the host's disk quota is spent: nothing was written"],
    ENAMETOOLONG: ["INVALID_PATH", "File name too long"],
  };
  const hit = code ? map[code] : undefined;
  return hit ? mk(hit[0], `${p}: ${hit[1]}`, p) : err;
}
const mk = (
  code:
    | "FILE_NOT_FOUND"
    | "NOT_A_DIRECTORY"
    | "IS_A_DIRECTORY"
    | "ALREADY_EXISTS"
    | "DIRECTORY_NOT_EMPTY"
    | "HOST_DISK_FULL"
    | "INVALID_PATH",
  m: string,
  p: string,
) => new SandtreeError(code, m, { path: p });

/** Opens the directory `name` in `dir` without following a symlink; a symlink or device there is UNSAFE_PATH. */
export async function openDirAt(dir: FileHandle, name: string, p: string): Promise<FileHandle> {
  try {
    return await open(at(dir.fd, name), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // O_NOFOLLOW on a symlink: ELOOP. ENOTDIR: a file (a plain refusal), or anything else, or a
    // directory swapped in since (the path changed under the call): refused as unsafe.
    if (code === "ELOOP") throw unsafe(p, "a symlink");
    if (code === "ENOTDIR") {
      const st = await lstat(at(dir.fd, name)).catch(() => null);
      if (st && !st.isFile()) throw unsafe(p, st);
    }
    throw fsError(err, p);
  }
}

/** Opens a volume's root directory (a path this server made: `root` itself is trusted, nothing under it). */
export async function openRoot(root: string): Promise<FileHandle> {
  return open(root, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
}

/**
 * Walks `parts` from the root, each directory opened from its parent's descriptor: answers the
 * last one (the caller closes it). Descriptors on the way are closed.
 */
export async function walk(root: FileHandle, parts: readonly string[], p: string): Promise<FileHandle> {
  let dir = root;
  for (const name of parts) {
    try {
      const next = await openDirAt(dir, name, p);
      if (dir !== root) await dir.close();
      dir = next;
    } catch (err) {
      if (dir !== root) await dir.close();
      throw err;
    }
  }
  return dir;
}

/**
 * Opens the regular file `name` in `dir` with `flags` (never following a symlink, never blocking
 * on a fifo) and checks with fstat that it is one: anything else is closed unread, UNSAFE_PATH.
 */
export async function openFileAt(dir: FileHandle, name: string, flags: number, p: string, mode?: number): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(at(dir.fd, name), flags | C.O_NOFOLLOW | C.O_NONBLOCK | C.O_NOCTTY, mode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw unsafe(p, "a symlink");
    // A device node on the volume's nodev mount cannot be opened at all: named, never opened.
    const st = code === "EACCES" ? await lstat(at(dir.fd, name)).catch(() => null) : null;
    if (st && !st.isFile() && !st.isDirectory()) throw unsafe(p, st);
    throw fsError(err, p);
  }
  const st = await fh.stat();
  if (st.isFile()) return fh;
  await fh.close();
  if (st.isDirectory()) throw new SandtreeError("IS_A_DIRECTORY", `${p} is a directory`, { path: p });
  throw unsafe(p, st);
}

/** lstat of `name` in `dir` (never follows), as the API's FileStat. */
export async function statAt(dir: FileHandle, name: string, p: string): Promise<Stats> {
  try {
    return await lstat(at(dir.fd, name));
  } catch (err) {
    throw fsError(err, p);
  }
}

export function toFileStat(p: string, st: Stats, name?: string, target?: string): FileStat {
  const type = st.isFile() ? "file" : st.isDirectory() ? "dir" : st.isSymbolicLink() ? "symlink" : "other";
  return {
    path: p,
    ...(name !== undefined ? { name } : {}),
    type,
    size: st.size,
    mode: st.mode & 0o7777,
    uid: st.uid,
    gid: st.gid,
    mtime_ms: Math.round(st.mtimeMs),
    ...(target !== undefined ? { target } : {}),
  };
}
