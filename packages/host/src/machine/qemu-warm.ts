import path from "node:path";
import { MemoryImages } from "../snapshots/memory-images.js";
import { ramDirFor } from "../snapshots/ram-placement.js";
import { TemplateStore } from "../snapshots/template-store.js";
import type { JailConfig } from "../vmm/jail.js";
import type { WarmCacheOptions, WarmCaches } from "./machine.js";

export type { WarmCacheOptions, WarmCaches };

/**
 * A QEMU host's warm caches: booted templates and memory images, under the data dir, in the
 * host's jail, their VMs' sockets in the host's run root.
 */
export function qemuWarmCaches(opts: WarmCacheOptions, jail: JailConfig, runRoot: string): WarmCaches {
  return {
    templates: new TemplateStore(
      opts.layersDir,
      path.join(opts.dataDir, "templates"),
      runRoot,
      opts.taps,
      jail,
      opts.onTemplateError,
    ),
    memoryImages: new MemoryImages(path.join(opts.dataDir, "memory-images"), runRoot, {
      taps: opts.taps,
      jail,
      // RAM files on tmpfs (named like the run root: one per data dir) while host memory allows.
      ramDir: ramDirFor(runRoot),
      ...(opts.onMemoryImageError ? { onBuildError: opts.onMemoryImageError } : {}),
    }),
  };
}
