import type { BlobStore } from "../blobs/blob-store.js";
import type { HostLayers } from "./host-layers.js";

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
   * A name in the layers directory for the image base `basePath` (ResolvedImage's: a disk can then
   * lie on it). Idempotent. IMAGE_NOT_FOUND, nothing linked, when that base is not on this host.
   */
  linkBase(basePath: string): Promise<string>;
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
