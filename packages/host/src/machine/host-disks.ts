import { SandtreeError } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";
import type { HostLayers } from "./host-layers.js";

/** How an image base is named across the host interface (ResolvedImage.base): its image's manifest digest. */
const BASE_NAME = /^sha256:[0-9a-f]{64}$/;

/** Whether `base` is an image base's name (not a path: a checkpoint row from before names held one). */
export function isBaseName(base: string): boolean {
  return BASE_NAME.test(base);
}

/** `base`, when it is an image base's name; VALIDATION_FAILED otherwise (a path above all). */
export function checkBaseName(base: string): string {
  if (isBaseName(base)) return base;
  throw new SandtreeError(
    "VALIDATION_FAILED",
    "an image base is named by its image's digest (sha256:<64 hex>), never by a path",
    {
      field: "base",
    },
  );
}

/** How the names of disk and layer files end on a host (their format: qcow2 for QEMU's). */
export const DISK_FILE_SUFFIX = ".qcow2";

/**
 * Disks and layers, owned by the host: a sandbox's writable disk lies on top of a chain of
 * read-only layers (checkpoints) over an image base. Each lies in the host's layers directory,
 * given to the host when it is made (a worker's is its own), and is named across this interface
 * by its name there, never by a path: a name that is not flat (a `/`, a `..`) is refused with
 * VALIDATION_FAILED (checkLayerName). So stored layers do not depend on where a sandbox lived,
 * and a remote host never gets a path of the control plane's.
 */
export interface HostDisks {
  /**
   * A name in the layers directory for the image base named `base` (ResolvedImage's: a disk can then
   * lie on it). Idempotent. A base name that is not one (a path): VALIDATION_FAILED, before any file
   * is touched; IMAGE_NOT_FOUND, nothing linked, when that base is not on this host.
   */
  linkBase(base: string): Promise<string>;
  /** A new writable disk named `disk` over the disk or layer named `backing`. */
  createDisk(backing: string, disk: string, sizeBytes: number, opts?: { signal?: AbortSignal }): Promise<void>;
  /** Its layers port over `blobs`, whose local files lie in its layers directory (`blobs.localDir`); see HostLayers. */
  layers(blobs: BlobStore): HostLayers;
  /** Whether `name` lies in the layers directory (a linked image base that is gone: false). */
  hasLayer(name: string, opts?: { signal?: AbortSignal }): Promise<boolean>;
  /** Removes the disk, layer or memory state `name` from the layers directory (not from the blob store). Idempotent. */
  removeLayer(name: string, opts?: { signal?: AbortSignal }): Promise<void>;
  /** The names in the layers directory that begin with `prefix` ("": all), sorted; a prefix with a `/`: VALIDATION_FAILED. */
  listLayers(prefix: string, opts?: { signal?: AbortSignal }): Promise<string[]>;
  /** Writes `dest` as one layer holding the whole chain of `layer` down to `backing` (all three names). */
  flattenLayer(
    layer: string,
    backing: string,
    dest: string,
    opts?: { signal?: AbortSignal },
  ): Promise<{ sha256: string; size: number }>;
}
