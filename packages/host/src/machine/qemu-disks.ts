import { flattenLayer, sealLayer } from "../disks/layers.js";
import { createOverlay, ensureBaseLink } from "../disks/overlay.js";
import type { HostDisks } from "./machine.js";

/** A QEMU host's disks: qcow2 overlays over a chain of qcow2 layers over the image base. */
export class QemuDisks implements HostDisks {
  async linkBase(dir: string, basePath: string): Promise<string> {
    return ensureBaseLink(dir, basePath);
  }

  createDisk(backing: string, file: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
    return createOverlay(backing, file, sizeBytes, opts);
  }

  sealLayer(file: string, opts: { signal?: AbortSignal } = {}): Promise<{ sha256: string; size: number }> {
    return sealLayer(file, opts);
  }

  flattenLayer(
    dir: string,
    layer: string,
    backing: string,
    dest: string,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ sha256: string; size: number }> {
    return flattenLayer(dir, layer, backing, dest, opts);
  }
}
