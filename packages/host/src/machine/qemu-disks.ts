import type { BlobStore } from "../blobs/blob-store.js";
import { flattenLayer, sealLayer } from "../disks/layers.js";
import { ensureBaseLink } from "../disks/overlay.js";
import { createOverlayCopy } from "../disks/overlay-copies.js";
import { BlobLayers, type HostLayers } from "./host-layers.js";
import type { HostDisks } from "./machine.js";

/** A QEMU host's disks: qcow2 overlays over a chain of qcow2 layers over the image base. */
export class QemuDisks implements HostDisks {
  async linkBase(dir: string, basePath: string): Promise<string> {
    return ensureBaseLink(dir, basePath);
  }

  createDisk(backing: string, file: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
    return createOverlayCopy(backing, file, sizeBytes, opts);
  }

  /** Stores and fetches its layers: a qcow2 layer is sealed (fsync, sha256) where it lies. */
  layers(blobs: BlobStore): HostLayers {
    return new BlobLayers(blobs, sealLayer);
  }

  readonly flattenLayer: HostDisks["flattenLayer"] = flattenLayer;
}
