import type { HostImages, ImageRequest, ImageSummary, ResolvedImage } from "../machine/machine.js";
import type { ImageStore, StoredImage } from "./image-store.js";

/** A host's images from its image store (local images and registry pulls, built on this host). */
export class StoreImages implements HostImages {
  constructor(readonly store: ImageStore) {}

  async resolve(ref: string, opts: ImageRequest): Promise<ResolvedImage> {
    return asResolved(await this.store.resolve(ref, opts));
  }

  check(ref: string, opts: ImageRequest): Promise<void> {
    return this.store.check(ref, opts);
  }

  async list(): Promise<ImageSummary[]> {
    return (await this.store.list()).map((i) => ({
      ref: i.ref,
      digest: i.digest,
      source: i.source,
      virtualSizeBytes: i.virtualSizeBytes,
      createdAt: i.createdAt,
    }));
  }

  async importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage> {
    return asResolved(await this.store.importLayout(dir, name, opts));
  }
}

function asResolved(i: StoredImage): ResolvedImage {
  return {
    ref: i.ref,
    digest: i.digest,
    base: i.digest,
    virtualSizeBytes: i.virtualSizeBytes,
    source: i.source,
    labels: i.config.labels ?? {},
  };
}
