import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { digestHex } from "../images/digest.js";
import { OciLayoutSource } from "../images/oci-layout.js";
import { DEFAULT_PLATFORM } from "../images/oci-types.js";
import { parseReference } from "../images/reference.js";
import type { HostImages, ImageRequest, ImageSummary, ResolvedImage } from "../machine/machine.js";
import { writeDiskFile } from "./fake-disks.js";

export interface FakeImagesOptions {
  /** The refs the host holds from the start (default: sandtree/busybox and sandtree/debian). */
  refs?: string[];
}

export const FAKE_IMAGE_REFS = ["sandtree/busybox", "sandtree/debian"];
const FAKE_SIZE = 64 * 1024 ** 2;

/**
 * The fake host's images: each known ref (canonical form) is an image whose digest is the sha256
 * of its name (its base a fake disk the host writes: withFakeBases). An unknown ref is IMAGE_NOT_FOUND, as
 * the real store answers a name it holds and cannot pull; nothing is ever pulled. importLayout
 * reads the layout's index and manifest (as the real store does) and registers the name under the
 * manifest's digest; its layers are not read.
 */
export class FakeImages implements HostImages {
  private readonly known = new Map<string, { digest: string; createdAt: string }>();

  constructor(opts: FakeImagesOptions = {}) {
    for (const ref of opts.refs ?? FAKE_IMAGE_REFS) this.add(parseReference(ref).canonical, nameDigest(ref));
  }

  private add(ref: string, digest: string): void {
    this.known.set(ref, { digest, createdAt: new Date().toISOString() });
  }

  private image(ref: string, digest: string): ResolvedImage {
    return { ref, digest, base: digest, virtualSizeBytes: FAKE_SIZE, source: "local", labels: {} };
  }

  async resolve(refText: string, opts: ImageRequest): Promise<ResolvedImage> {
    opts.signal?.throwIfAborted();
    const ref = parseReference(refText).canonical;
    const found = this.known.get(ref);
    if (!found) throw notFound(ref);
    return this.image(ref, found.digest);
  }

  async check(refText: string, opts: ImageRequest): Promise<void> {
    opts.signal?.throwIfAborted();
    const ref = parseReference(refText).canonical;
    if (!this.known.has(ref)) throw notFound(ref);
  }

  async list(): Promise<ImageSummary[]> {
    return [...this.known].map(([ref, { digest, createdAt }]) => ({
      ref,
      digest,
      source: "local",
      virtualSizeBytes: FAKE_SIZE,
      createdAt,
    }));
  }

  async importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage> {
    const ref = parseReference(name).canonical;
    const resolved = await new OciLayoutSource(dir).resolveManifest(opts.layoutRef, {
      platform: DEFAULT_PLATFORM,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    this.add(ref, resolved.digest);
    return this.image(ref, resolved.digest);
  }
}

/** The file of the fake base named `base` (checked: checkBaseName) in the fake host's images folder `dir`. */
export function fakeBaseFile(dir: string, base: string): string {
  return path.join(dir, digestHex(base), "base.fake");
}

/**
 * `images` whose every image's base the fake host holds: as a real host builds a base when it
 * resolves an image, its fake base disk (fake-disks.ts, no files) is written under `dirOf()`.
 */
export function withFakeBases(images: HostImages, dirOf: () => string): HostImages {
  const held = (i: ResolvedImage): ResolvedImage => {
    const file = fakeBaseFile(dirOf(), i.base);
    mkdirSync(path.dirname(file), { recursive: true });
    writeDiskFile(file, { fake: 1, backing: null, files: null });
    return i;
  };
  return {
    resolve: async (ref, opts) => held(await images.resolve(ref, opts)),
    check: (ref, opts) => images.check(ref, opts),
    list: () => images.list(),
    importLayout: async (dir, name, opts) => held(await images.importLayout(dir, name, opts)),
  };
}

function nameDigest(ref: string): string {
  return `sha256:${createHash("sha256").update(parseReference(ref).canonical).digest("hex")}`;
}

function notFound(ref: string): SandtreeError {
  return new SandtreeError("IMAGE_NOT_FOUND", `image ${ref} is not on this (fake) host, which pulls nothing`, { ref });
}
