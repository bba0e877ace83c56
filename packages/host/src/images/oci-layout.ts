import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { digestHex, isDigest, sha256Bytes, writeVerified } from "./digest.js";
import type { ImageSource, ManifestDocument, ResolvedManifest, ResolveManifestOptions } from "./image-source.js";
import { resolveThroughIndex } from "./image-source.js";
import { type Descriptor, MediaType, parseIndex, parseJson, REF_NAME_ANNOTATION } from "./oci-types.js";

/**
 * A local OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/...`) read as
 * an image source: what `skopeo copy ... oci:DIR:TAG` or `umoci` produce.
 */
export class OciLayoutSource implements ImageSource {
  readonly description: string;

  constructor(readonly dir: string) {
    this.description = `oci:${dir}`;
  }

  async resolveManifest(reference: string | undefined, opts: ResolveManifestOptions = {}): Promise<ResolvedManifest> {
    const indexBytes = await this.readLayoutFile("index.json");
    const index = parseIndex(parseJson(indexBytes, `${this.dir}/index.json`));
    const fetchDoc = (digest: string) => this.readManifestBlob(digest);
    if (reference === undefined) {
      const only = index.manifests.length === 1 ? index.manifests[0] : undefined;
      if (only) return resolveThroughIndex(fetchDoc, await fetchDoc(only.digest), opts.platform);
      // Several entries and no name: treat index.json itself as a multi-platform index.
      const top: ManifestDocument = {
        bytes: indexBytes,
        digest: sha256Bytes(indexBytes),
        contentType: MediaType.ociIndex,
      };
      return resolveThroughIndex(fetchDoc, top, opts.platform);
    }
    const entry = index.manifests.find((m) =>
      isDigest(reference) ? m.digest === reference : m.annotations?.[REF_NAME_ANNOTATION] === reference,
    );
    if (!entry) {
      const names = index.manifests.map((m) => m.annotations?.[REF_NAME_ANNOTATION]).filter(Boolean);
      throw new SandtreeError("IMAGE_NOT_FOUND", `${this.description} has no image named "${reference}"`, {
        layout: this.dir,
        names,
      });
    }
    return resolveThroughIndex(fetchDoc, await fetchDoc(entry.digest), opts.platform);
  }

  async fetchBlob(descriptor: Descriptor, destPath: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const src = this.blobPath(descriptor.digest);
    await writeVerified(createReadStream(src), destPath, descriptor, { signal: opts.signal }).catch((e: unknown) => {
      throw missingAsNotFound(e, descriptor.digest, this.dir);
    });
  }

  private blobPath(digest: string): string {
    return join(this.dir, "blobs", "sha256", digestHex(digest));
  }

  private async readManifestBlob(digest: string): Promise<ManifestDocument> {
    const bytes = await readFile(this.blobPath(digest)).catch((e: unknown) => {
      throw missingAsNotFound(e, digest, this.dir);
    });
    if (sha256Bytes(bytes) !== digest) {
      throw new SandtreeError("IMAGE_INVALID", `blob ${digest} in ${this.dir} does not match its digest`);
    }
    return { bytes, digest };
  }

  private async readLayoutFile(name: string): Promise<Buffer> {
    try {
      const marker = parseJson(await readFile(join(this.dir, "oci-layout")), "oci-layout");
      if (marker.imageLayoutVersion !== "1.0.0") {
        throw new SandtreeError("IMAGE_INVALID", `${this.dir}: unsupported imageLayoutVersion`);
      }
      return await readFile(join(this.dir, name));
    } catch (e) {
      if (e instanceof SandtreeError) throw e;
      throw new SandtreeError("IMAGE_NOT_FOUND", `${this.dir} is not an OCI image layout`, {
        layout: this.dir,
        cause: (e as Error).message,
      });
    }
  }
}

function missingAsNotFound(e: unknown, digest: string, dir: string): unknown {
  if ((e as NodeJS.ErrnoException).code === "ENOENT") {
    return new SandtreeError("IMAGE_INVALID", `blob ${digest} is missing from ${dir}`, { digest, layout: dir });
  }
  return e;
}
