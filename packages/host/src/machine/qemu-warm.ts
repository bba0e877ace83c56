import path from "node:path";
import { MemoryImages } from "../snapshots/memory-images.js";
import { ramDirFor } from "../snapshots/ram-placement.js";
import { TemplateStore } from "../snapshots/template-store.js";
import type { JailConfig } from "../vmm/jail.js";
import { layerFile } from "./host-layers.js";
import type { WarmCacheOptions, WarmCaches } from "./machine.js";

export type { WarmCacheOptions, WarmCaches };

/**
 * A QEMU host's warm caches: booted templates and memory images, under the data dir, in the
 * host's jail, their VMs' sockets in the host's run root; image templates' disks and memory states
 * in its layers directory.
 */
export function qemuWarmCaches(
  opts: WarmCacheOptions,
  host: { jail: JailConfig; runRoot: string; layersDir: string },
): WarmCaches {
  const { jail, runRoot, layersDir } = host;
  return {
    templates: new TemplateStore(layersDir, path.join(opts.dataDir, "templates"), runRoot, opts.taps, jail, opts.onTemplateError),
    memoryImages: new MemoryImages(path.join(opts.dataDir, "memory-images"), runRoot, {
      taps: opts.taps,
      jail,
      stateFile: (name) => layerFile(layersDir, name, "memoryState"),
      // RAM files on tmpfs (named like the run root: one per data dir) while host memory allows.
      ramDir: ramDirFor(runRoot),
      ...(opts.onMemoryImageError ? { onBuildError: opts.onMemoryImageError } : {}),
    }),
  };
}
