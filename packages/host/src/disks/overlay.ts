import { closeSync, openSync, readlinkSync, readSync, symlinkSync, unlinkSync } from "node:fs";
import path from "node:path";
import { runCommand } from "../util/run-command.js";

/**
 * A copy-on-write qcow2 overlay. `backing` may be a name relative to the overlay's directory
 * (how layers refer to each other, so stored layers do not depend on absolute paths).
 */
export async function createOverlay(
  backing: string,
  overlay: string,
  sizeBytes: number,
  opts: { signal?: AbortSignal; unsafe?: boolean } = {},
): Promise<void> {
  // `unsafe` skips opening the backing file: needed when a running VM holds its lock.
  const argv = ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", backing, ...(opts.unsafe ? ["-u"] : [])];
  await runCommand([...argv, overlay, String(sizeBytes)], opts.signal ? { signal: opts.signal } : {});
}

/** An empty qcow2 disk (no backing): a warm template's placeholder root, never mounted. */
export async function createBlankDisk(file: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
  await runCommand(
    ["qemu-img", "create", "-q", "-f", "qcow2", file, String(sizeBytes)],
    opts.signal ? { signal: opts.signal } : {},
  );
}

/**
 * A symlink in `dir` to an image base, named after the base's directory (its digest), so layers in
 * `dir` can name the base relatively. Returns the link's name. Idempotent.
 */
export function ensureBaseLink(dir: string, basePath: string): string {
  const name = `base-${path.basename(path.dirname(basePath))}-${path.basename(basePath)}`;
  const link = path.join(dir, name);
  let current: string | null = null;
  try {
    current = readlinkSync(link);
  } catch {}
  if (current !== basePath) {
    if (current !== null) unlinkSync(link);
    try {
      symlinkSync(basePath, link);
    } catch (err) {
      // Another create made it at the same moment.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  return name;
}

/**
 * Runs `read` on an open qcow2 file whose first `bytes` header bytes are in `header` (magic
 * checked); null when the file cannot be opened, is shorter, or is not a qcow2.
 */
function readQcow2<T>(file: string, bytes: number, read: (fd: number, header: Buffer) => T | null): T | null {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return null;
  }
  try {
    const header = Buffer.alloc(bytes);
    if (readSync(fd, header, 0, bytes, 0) < bytes || header.readUInt32BE(0) !== 0x514649fb) return null;
    return read(fd, header);
  } finally {
    closeSync(fd);
  }
}

/** A qcow2 file's virtual size in bytes (its header), or null when it is not a qcow2. */
export function qcow2VirtualSize(file: string): number | null {
  return readQcow2(file, 32, (_fd, header) => Number(header.readBigUInt64BE(24)));
}

/**
 * The backing file name a qcow2 image's header records (as written: usually relative to the
 * image's directory), or null for an image without one or a file that is not qcow2. Reads the
 * header directly: no qemu-img process, no image lock.
 */
export function qcow2BackingName(file: string): string | null {
  return readQcow2(file, 20, (fd, header) => {
    const offset = header.readBigUInt64BE(8);
    const size = header.readUInt32BE(16);
    // The spec caps the name at 1023 bytes; anything else is not a name we wrote.
    if (offset === 0n || size === 0 || size > 1023) return null;
    const name = Buffer.alloc(size);
    if (readSync(fd, name, 0, size, Number(offset)) < size) return null;
    return name.toString("utf8");
  });
}
