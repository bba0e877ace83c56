import { lstat, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { runCommand, throwIfAborted } from "../util/run-command.js";

const MiB = 1024 * 1024;

export interface RootfsUsage {
  bytes: number;
  inodes: number;
}

/** Allocated bytes and inode count of a tree (hard links counted once), without following links. */
export async function measureRootfs(dir: string, signal?: AbortSignal): Promise<RootfsUsage> {
  const seen = new Set<string>();
  let bytes = 0;
  let inodes = 0;
  const walk = async (path: string): Promise<void> => {
    throwIfAborted(signal);
    const st = await lstat(path);
    const key = `${st.dev}:${st.ino}`;
    if (seen.has(key)) return;
    seen.add(key);
    inodes += 1;
    bytes += Math.max(st.blocks * 512, 0);
    if (st.isDirectory()) for (const name of await readdir(path)) await walk(join(path, name));
  };
  await walk(dir);
  return { bytes, inodes };
}

/** Used size * 1.3 + 64 MiB, rounded up to a whole MiB: room for metadata and a little growth. */
export function ext4SizeFor(usage: RootfsUsage): number {
  const raw = usage.bytes * 1.3 + 64 * MiB;
  return Math.ceil(raw / MiB) * MiB;
}

export interface BuildBaseOptions {
  /** Overrides the computed size (bytes, rounded up to a MiB). */
  sizeBytes?: number;
  label?: string;
  signal?: AbortSignal | undefined;
}

export interface BuiltBase {
  path: string;
  virtualSizeBytes: number;
}

/**
 * Turns a root filesystem directory into a qcow2 base: `mke2fs -d` copies the tree (owners,
 * modes, xattrs) into a raw ext4 image, which `qemu-img convert` compacts into qcow2.
 */
export async function buildBaseImage(rootfs: string, qcow2Path: string, opts: BuildBaseOptions = {}): Promise<BuiltBase> {
  const { signal } = opts;
  const usage = await measureRootfs(rootfs, signal);
  const size = opts.sizeBytes !== undefined ? Math.ceil(opts.sizeBytes / MiB) * MiB : ext4SizeFor(usage);
  // Small trees full of tiny files run out of inodes before blocks at the default ratio.
  const inodes = Math.ceil(usage.inodes * 1.3) + 4096;
  const rawPath = `${qcow2Path}.raw`;
  try {
    await runCommand(
      [
        "mke2fs",
        "-q",
        "-F",
        "-t",
        "ext4",
        "-d",
        rootfs,
        "-L",
        opts.label ?? "root",
        "-N",
        String(inodes),
        "-E",
        "root_owner=0:0",
        rawPath,
        `${size / 1024}k`,
      ],
      { signal, errorCode: "IMAGE_INVALID" },
    );
    await runCommand(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qcow2Path], {
      signal,
      errorCode: "HOST_COMMAND_FAILED",
    });
  } finally {
    await rm(rawPath, { force: true });
  }
  const info = await runCommand(["qemu-img", "info", "--output=json", qcow2Path], { signal, errorCode: "HOST_COMMAND_FAILED" });
  const virtualSizeBytes = (JSON.parse(info.stdout) as { "virtual-size"?: number })["virtual-size"] ?? size;
  await stat(qcow2Path);
  return { path: qcow2Path, virtualSizeBytes };
}
