import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { createOverlay } from "./overlay.js";

// A sandbox's disk without a qemu-img process each time. `qemu-img create -f qcow2 -F qcow2 -b
// NAME FILE SIZE` writes the same bytes for the same NAME and SIZE (a header naming the backing,
// an empty refcount and L1 table: no UUID, no time), so the first create of a pair runs qemu-img
// and the later ones write its bytes again. A process start is cheap on a host, but not under
// nested KVM, where the host's own CPU is emulated: there it was a second of a warm create.

/** The pairs remembered (a few templates and images, a few disk sizes each). */
const MAX_KEPT = 32;
const kept = new Map<string, Buffer>();

/**
 * createOverlay's result, written from memory after the first of each (backing, size). A backing
 * that is gone is left to qemu-img, which says so.
 */
export async function createOverlayCopy(
  backing: string,
  overlay: string,
  sizeBytes: number,
  opts: { signal?: AbortSignal } = {},
): Promise<void> {
  const key = `${backing}\0${sizeBytes}`;
  const bytes = kept.get(key);
  if (bytes && existsSync(path.resolve(path.dirname(overlay), backing))) {
    opts.signal?.throwIfAborted();
    await writeFile(overlay, bytes);
    return;
  }
  await createOverlay(backing, overlay, sizeBytes, opts);
  const made = await readFile(overlay);
  if (kept.size >= MAX_KEPT) kept.delete(kept.keys().next().value as string);
  kept.set(key, made);
}
