import { mkdirSync } from "node:fs";
import type { BlobStore } from "../blobs/blob-store.js";
import { flattenLayer, sealLayer } from "../disks/layers.js";
import { createOverlayCopy } from "../disks/overlay-copies.js";
import { BlobLayers, checkLayerName, type HostLayers } from "./host-layers.js";
import { LayerDirectory } from "./layer-files.js";
import type { HostDisks } from "./machine.js";

/**
 * A QEMU host's disks: qcow2 overlays over a chain of qcow2 layers over the image base, all in its
 * layers directory `layersDir` and named there (each name checked: checkLayerName).
 */
export abstract class QemuDisks extends LayerDirectory implements HostDisks {
  constructor(readonly layersDir: string) {
    super();
  }

  async createDisk(backing: string, disk: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const file = this.file(disk, "disk");
    checkLayerName(backing, "backing");
    mkdirSync(this.layersDir, { recursive: true });
    return createOverlayCopy(backing, file, sizeBytes, opts);
  }

  /** Stores and fetches its layers: a qcow2 layer is sealed (fsync, sha256) where it lies. */
  layers(blobs: BlobStore): HostLayers {
    return new BlobLayers(this.layersDir, blobs, sealLayer);
  }

  async flattenLayer(
    layer: string,
    backing: string,
    dest: string,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ sha256: string; size: number }> {
    const names = [checkLayerName(layer, "layer"), checkLayerName(backing, "backing"), checkLayerName(dest, "dest")] as const;
    return flattenLayer(this.layersDir, ...names, opts);
  }
}
