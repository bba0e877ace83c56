import { rm } from "node:fs/promises";
import path from "node:path";
import type { BlobStore, VolumeImages } from "@sandtree/host";
import type { PackedVolume } from "@sandtree/protocol";
import { packVolume } from "./volume-archive.js";
import { snapshotInto } from "./volume-snapshots.js";

/** Where a sync's snapshot of the volume at `dir` (`<root>/<id>/data`) is made: `<root>/<id>.sync/data`. */
function syncDirOf(dir: string): string {
  return path.join(`${path.dirname(dir)}.sync`, "data");
}

async function discard(images: VolumeImages, dir: string): Promise<void> {
  await images.unmount(dir);
  await rm(path.dirname(dir), { recursive: true, force: true });
}

/**
 * The volume at `dir`, which sandboxes may be writing, packed into the blob store under `key` from
 * a consistent copy: the volume snapshot machinery (its image copied while the file system is frozen,
 * reflinked where the host's file system clones blocks; a tree copy for a volume without an
 * image), mounted beside it, packed, then removed. A copy a crash left is removed first.
 */
export async function packSnapshot(
  images: VolumeImages,
  blobs: BlobStore,
  dir: string,
  sizeGb: number,
  key: string,
  signal?: AbortSignal,
): Promise<PackedVolume> {
  const copy = syncDirOf(dir);
  await discard(images, copy);
  try {
    await snapshotInto(images, dir, copy, sizeGb);
    return await packVolume(blobs, copy, key, signal);
  } finally {
    await discard(images, copy).catch(() => {});
  }
}
