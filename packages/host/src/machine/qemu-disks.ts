import { mkdirSync } from "node:fs";
import type { BlobStore } from "../blobs/blob-store.js";
import { flattenLayer, sealLayer } from "../disks/layers.js";
import { createOverlayCopy } from "../disks/overlay-copies.js";
import { BlobLayers, checkLayerName, type HostLayers, layerFile } from "./host-layers.js";
import { hasLayerFile, linkBaseIn, listLayerFiles, removeLayerFile } from "./layer-files.js";
import type { HostDisks } from "./machine.js";

/**
 * A QEMU host's disks: qcow2 overlays over a chain of qcow2 layers over the image base, all in its
 * layers directory `layersDir` and named there (each name checked: checkLayerName).
 */
export class QemuDisks implements HostDisks {
  constructor(readonly layersDir: string) {}

  /** The file of the disk, layer or memory state `name` (VALIDATION_FAILED on `field` when it is not a name). */
  protected file(name: string, field: string): string {
    return layerFile(this.layersDir, name, field);
  }

  linkBase(basePath: string): Promise<string> {
    return linkBaseIn(this.layersDir, basePath);
  }

  async createDisk(backing: string, disk: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const file = this.file(disk, "disk");
    checkLayerName(backing, "backing");
    mkdirSync(this.layersDir, { recursive: true });
    return createOverlayCopy(backing, file, sizeBytes, opts);
  }

  hasLayer(name: string): Promise<boolean> {
    return hasLayerFile(this.layersDir, name);
  }

  removeLayer(name: string): Promise<void> {
    return removeLayerFile(this.layersDir, name);
  }

  listLayers(prefix: string): Promise<string[]> {
    return listLayerFiles(this.layersDir, prefix);
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
