import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { createBlankDisk, createOverlay } from "./overlay.js";

// A sandbox's disk without a qemu-img process each time. `qemu-img create -f qcow2 -F qcow2 -b
// NAME FILE SIZE` writes the same bytes for the same NAME and SIZE (a header naming the backing,
// an empty refcount and L1 table: no UUID, no time), so the first create of a pair runs qemu-img
// and the later ones write its bytes again. A process start is cheap on a host, but not under
// nested KVM, where the host's own CPU is emulated: there it was a second of a warm create.
// The children of one fork ask for the same pair at once: they wait for the first one's bytes
// (one qemu-img per fork, not one per child, on the way to the fork's answer).

/** The pairs remembered (a few templates and images, a few disk sizes each). */
const MAX_KEPT = 32;
const kept = new Map<string, Buffer>();
/** The first create of a pair while it runs: later asks for the same pair wait for its bytes. */
const making = new Map<string, Promise<Buffer>>();

function keep(key: string, bytes: Buffer): void {
  if (kept.size >= MAX_KEPT) kept.delete(kept.keys().next().value as string);
  kept.set(key, bytes);
}

/**
 * The bytes `make` writes to `file` for `key`: from memory after the first, else `make` runs
 * (one at a time per key: a second caller waits for the first's bytes and writes them).
 * A first create that failed is not remembered: the next caller runs `make` itself.
 */
async function copyOf(key: string, file: string, make: () => Promise<void>, signal?: AbortSignal): Promise<void> {
  const bytes = kept.get(key) ?? (await making.get(key)?.catch(() => null));
  if (bytes) {
    signal?.throwIfAborted();
    await writeFile(file, bytes);
    return;
  }
  const first = (async () => {
    await make();
    const made = await readFile(file);
    keep(key, made);
    return made;
  })();
  making.set(key, first);
  try {
    await first;
  } finally {
    if (making.get(key) === first) making.delete(key);
  }
}

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
  if (!existsSync(path.resolve(path.dirname(overlay), backing))) return createOverlay(backing, overlay, sizeBytes, opts);
  return copyOf(`${backing}\0${sizeBytes}`, overlay, () => createOverlay(backing, overlay, sizeBytes, opts), opts.signal);
}

/** createBlankDisk's result (a memory image's placeholder root), written from memory after the first of each size. */
export function createBlankDiskCopy(file: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
  return copyOf(`\0blank\0${sizeBytes}`, file, () => createBlankDisk(file, sizeBytes, opts), opts.signal);
}
