import type { RegistryCredentials } from "@sandtree/protocol";

export interface ResolvedImage {
  ref: string;
  digest: string;
  basePath: string;
  virtualSizeBytes: number;
  source: "local" | "registry";
  /** The image config's labels (image-defaults.ts reads sandtree's). */
  labels?: Record<string, string>;
}

export interface ImageSummary {
  ref: string;
  digest: string;
  source: "local" | "registry";
  virtualSizeBytes: number;
  createdAt?: string | null;
}

/** The seam between the server and the host's image store (and tests). */
export interface ImageResolver {
  resolve(ref: string, opts: { credentials?: RegistryCredentials; signal?: AbortSignal }): Promise<ResolvedImage>;
  /** Throws IMAGE_NOT_FOUND quickly when the image is neither local nor in its registry. */
  check(ref: string, opts: { credentials?: RegistryCredentials; signal?: AbortSignal }): Promise<void>;
  list(): Promise<ImageSummary[]>;
  importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage>;
}
