import { SandtreeError } from "@sandtree/protocol";
import {
  DEFAULT_PLATFORM,
  type Descriptor,
  type ImageManifest,
  manifestKind,
  type Platform,
  parseIndex,
  parseJson,
  parseManifest,
  selectPlatform,
} from "./oci-types.js";

export interface ResolvedManifest {
  /** Digest of the platform-specific image manifest: the cache key of the built base. */
  digest: string;
  manifest: ImageManifest;
  /** Digest of the index the manifest was selected from, when the reference named an index. */
  indexDigest?: string;
}

export interface ResolveManifestOptions {
  platform?: Platform;
  signal?: AbortSignal;
}

/**
 * Where image manifests and blobs come from: a registry repository or a local OCI layout.
 * The image builder only sees this interface.
 */
export interface ImageSource {
  readonly description: string;
  /** `reference` is a tag, a digest, or (for layouts) a ref name; undefined means the default. */
  resolveManifest(reference: string | undefined, opts?: ResolveManifestOptions): Promise<ResolvedManifest>;
  /** Writes the blob to `destPath`, verifying its digest and size. */
  fetchBlob(descriptor: Descriptor, destPath: string, opts?: { signal?: AbortSignal }): Promise<void>;
}

export interface ManifestDocument {
  bytes: Uint8Array;
  digest: string;
  contentType?: string | undefined;
}

/**
 * Follows an index (or a nested index) down to the image manifest for `platform`.
 * `fetchDoc` fetches one manifest document by tag or digest and verifies its digest.
 */
export async function resolveThroughIndex(
  fetchDoc: (reference: string) => Promise<ManifestDocument>,
  first: ManifestDocument,
  platform: Platform = DEFAULT_PLATFORM,
): Promise<ResolvedManifest> {
  let doc = first;
  let indexDigest: string | undefined;
  for (let depth = 0; depth < 4; depth++) {
    const json = parseJson(doc.bytes, "manifest");
    if (manifestKind(json, doc.contentType) === "manifest") {
      const resolved: ResolvedManifest = { digest: doc.digest, manifest: parseManifest(json) };
      if (indexDigest !== undefined) resolved.indexDigest = indexDigest;
      return resolved;
    }
    indexDigest ??= doc.digest;
    const entry = selectPlatform(parseIndex(json), platform);
    doc = await fetchDoc(entry.digest);
  }
  throw new SandtreeError("IMAGE_INVALID", "image indexes nested too deeply");
}
