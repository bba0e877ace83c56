import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { SandtreeError } from "@sandtree/protocol";
import type { VolumeImages } from "./volume-image.js";

const execFileP = promisify(execFile);

/**
 * Copies the tree under `src` into the existing directory `dst`, owners, modes, times, links and
 * special files as they are (never following a symlink). Each file's blocks are shared with its
 * source where the file system can clone them (FICLONE: xfs with reflink, btrfs): a snapshot then
 * costs its metadata, and a write to either copy allocates only the blocks it changes. Elsewhere
 * (ext4) `--reflink=auto` falls back to copying the bytes (docs/architecture.md, "Volume snapshots").
 */
export async function cloneTree(src: string, dst: string): Promise<void> {
  try {
    await execFileP("cp", ["-a", "--reflink=auto", "--", `${src}/.`, dst], { maxBuffer: 1 << 20 });
  } catch (err) {
    const text = `${(err as { stderr?: string }).stderr ?? ""} ${(err as Error).message}`;
    const full = /No space left|Disk quota exceeded/.test(text);
    throw new SandtreeError(full ? "HOST_DISK_FULL" : "INTERNAL", `could not snapshot the volume: ${text.trim().split("\n")[0]}`);
  }
}

/**
 * A snapshot of the volume at `src` as the new volume at `dst`: its image copied while frozen
 * where it has one; else (a volume made unbounded) a new image filled with a copy of its tree.
 */
export async function snapshotInto(images: VolumeImages, src: string, dst: string, sizeGb: number): Promise<void> {
  if (await images.hasImage(src)) return images.snapshot(src, dst);
  await images.create(dst, sizeGb);
  await cloneTree(src, dst);
}
