import type { HostDisks } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { baseHere } from "../checkpoints/checkpoint-chain.js";
import type { ImageResolver } from "../images/image-resolver.js";

/** A checkpoint's chain in this store, top first (its ancestors' rows, as far as they go). */
export async function chainOf(store: Store, top: CheckpointRow): Promise<CheckpointRow[]> {
  const chain: CheckpointRow[] = [top];
  for (let c = top; c.parent_id; ) {
    const parent = await store.getCheckpoint(c.parent_id);
    if (!parent || chain.length >= 10_000) break;
    chain.push(parent);
    c = parent;
  }
  return chain;
}

/** The image reference pinned to a digest: `repo@sha256:...` (the tag, if any, dropped). */
function pinned(image: string, digest: string): string {
  const repo = image.replace(/@.*$/, "").replace(/:([^/:]+)$/, "");
  return `${repo}@${digest}`;
}

/**
 * The image base under a checkpoint's chain on this host, pulled (by the digest it recorded) when
 * this host never had it, with the link its bottom layer names beside the layers. A base's name is
 * the same on every host; a row without one (a worker's copy) or with a path (from before names)
 * gets this host's name for it.
 */
export async function ensureBase(
  store: Store,
  images: ImageResolver,
  disks: HostDisks,
  row: CheckpointRow,
  signal?: AbortSignal,
): Promise<string> {
  let base = row.base;
  // A base this host does not hold (or never named), or an image removed since: resolved here again.
  if (!(await baseHere(disks, base))) {
    const o = signal ? { signal } : {};
    try {
      const r = await images.resolve(row.image_digest ? pinned(row.image, row.image_digest) : row.image, o);
      base = r.base;
    } catch (err) {
      throw new SandtreeError(
        "CHECKPOINT_CORRUPT",
        `the image of checkpoint ${row.id} (${row.image}${row.image_digest ? `@${row.image_digest}` : ""}) cannot be had on this host: ${(err as Error).message}`,
        { checkpoint_id: row.id },
      );
    }
    if (base !== row.base) await store.updateCheckpoint(row.id, { base });
  }
  await disks.linkBase(base);
  return base;
}
