import { ImageStore } from "@sandtree/host";
import type { RegistryCredentials } from "@sandtree/protocol";
import type { ImageResolver, ImageSummary, ResolvedImage } from "./image-resolver.js";

/** The server's images come from the host's image store (local images and registry pulls). */
export class HostImageResolver implements ImageResolver {
  constructor(private readonly store: ImageStore = new ImageStore()) {}

  async resolve(ref: string, opts: { credentials?: RegistryCredentials; signal?: AbortSignal }): Promise<ResolvedImage> {
    const image = await this.store.resolve(ref, opts);
    return { ...image, labels: image.config.labels ?? {} };
  }

  check(ref: string, opts: { credentials?: RegistryCredentials; signal?: AbortSignal }): Promise<void> {
    return this.store.check(ref, opts);
  }

  importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage> {
    return this.store.importLayout(dir, name, opts);
  }

  async list(): Promise<ImageSummary[]> {
    return this.store.list();
  }
}
