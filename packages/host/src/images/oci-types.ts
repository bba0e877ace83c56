import { SandtreeError } from "@sandtree/protocol";
import { assertDigest } from "./digest.js";

export const MediaType = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  ociLayer: "application/vnd.oci.image.layer.v1.tar",
  ociLayerGzip: "application/vnd.oci.image.layer.v1.tar+gzip",
  ociLayerZstd: "application/vnd.oci.image.layer.v1.tar+zstd",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
  dockerLayerGzip: "application/vnd.docker.image.rootfs.diff.tar.gzip",
} as const;

export const INDEX_TYPES: readonly string[] = [MediaType.ociIndex, MediaType.dockerList];
export const MANIFEST_TYPES: readonly string[] = [MediaType.ociManifest, MediaType.dockerManifest];
export const LAYER_TYPES: readonly string[] = [
  MediaType.ociLayer,
  MediaType.ociLayerGzip,
  MediaType.ociLayerZstd,
  MediaType.dockerLayerGzip,
  // Non-distributable variants carry the same bytes; we only refuse ones without a blob.
  "application/vnd.oci.image.layer.nondistributable.v1.tar",
  "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
  "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];

/** The Accept header for manifest requests: every type we can read. */
export const MANIFEST_ACCEPT = [...INDEX_TYPES, ...MANIFEST_TYPES].join(", ");

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: Platform;
  annotations?: Record<string, string>;
}

export interface ImageManifest {
  mediaType: string;
  config: Descriptor;
  layers: Descriptor[];
}

export interface ImageIndex {
  mediaType: string;
  manifests: Descriptor[];
  annotations?: Record<string, string>;
}

/** The parts of an image config the platform uses to run a process. */
export interface ImageRuntimeConfig {
  env: string[];
  entrypoint: string[];
  cmd: string[];
  workingDir: string;
  user: string;
  /** The image config's labels (optional: bases built before labels were kept have none). */
  labels?: Record<string, string>;
}

export const DEFAULT_PLATFORM: Platform = { os: "linux", architecture: "amd64" };
export const REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name";

function bad(what: string, details?: Record<string, unknown>): SandtreeError {
  return new SandtreeError("IMAGE_INVALID", what, details);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === "string") out[k] = val;
  return out;
}

export function parseDescriptor(v: unknown, what: string): Descriptor {
  if (!isObject(v)) throw bad(`${what}: descriptor is not an object`);
  const { mediaType, digest, size, platform, annotations } = v;
  if (typeof mediaType !== "string") throw bad(`${what}: descriptor has no mediaType`);
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
    throw bad(`${what}: descriptor has a bad size`);
  }
  const d: Descriptor = { mediaType, digest: assertDigest(digest, what), size };
  if (isObject(platform) && typeof platform.os === "string" && typeof platform.architecture === "string") {
    d.platform = { os: platform.os, architecture: platform.architecture };
    if (typeof platform.variant === "string") d.platform.variant = platform.variant;
  }
  const ann = stringMap(annotations);
  if (ann) d.annotations = ann;
  return d;
}

export function parseJson(bytes: Uint8Array, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch {
    throw bad(`${what} is not valid JSON`);
  }
  if (!isObject(v)) throw bad(`${what} is not a JSON object`);
  return v;
}

/** The media type of a manifest document: the body's field wins, the HTTP header is a fallback. */
export function manifestKind(doc: Record<string, unknown>, headerType?: string): "index" | "manifest" {
  const mt = typeof doc.mediaType === "string" ? doc.mediaType : headerType?.split(";")[0]?.trim();
  if (mt && INDEX_TYPES.includes(mt)) return "index";
  if (mt && MANIFEST_TYPES.includes(mt)) return "manifest";
  if (!mt && Array.isArray(doc.manifests)) return "index";
  if (!mt && isObject(doc.config)) return "manifest";
  throw bad(`unsupported manifest media type ${mt ?? "(none)"}`, { mediaType: mt });
}

export function parseIndex(doc: Record<string, unknown>): ImageIndex {
  if (!Array.isArray(doc.manifests)) throw bad("image index has no manifests");
  const idx: ImageIndex = {
    mediaType: typeof doc.mediaType === "string" ? doc.mediaType : MediaType.ociIndex,
    manifests: doc.manifests.map((m, i) => parseDescriptor(m, `index.manifests[${i}]`)),
  };
  const ann = stringMap(doc.annotations);
  if (ann) idx.annotations = ann;
  return idx;
}

export function parseManifest(doc: Record<string, unknown>): ImageManifest {
  if (doc.schemaVersion !== 2) throw bad("only schemaVersion 2 manifests are supported");
  if (!Array.isArray(doc.layers)) throw bad("manifest has no layers");
  const layers = doc.layers.map((l, i) => parseDescriptor(l, `manifest.layers[${i}]`));
  for (const l of layers) {
    if (!LAYER_TYPES.includes(l.mediaType)) {
      throw bad(`unsupported layer media type ${l.mediaType}`, { digest: l.digest });
    }
  }
  return {
    mediaType: typeof doc.mediaType === "string" ? doc.mediaType : MediaType.ociManifest,
    config: parseDescriptor(doc.config, "manifest.config"),
    layers,
  };
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : [];
}

export function parseRuntimeConfig(doc: Record<string, unknown>): ImageRuntimeConfig {
  const c = isObject(doc.config) ? doc.config : {};
  return {
    env: strings(c.Env),
    entrypoint: strings(c.Entrypoint),
    cmd: strings(c.Cmd),
    workingDir: typeof c.WorkingDir === "string" ? c.WorkingDir : "",
    user: typeof c.User === "string" ? c.User : "",
    labels: isObject(c.Labels)
      ? Object.fromEntries(Object.entries(c.Labels).filter((e): e is [string, string] => typeof e[1] === "string"))
      : {},
  };
}

/** Picks the entry for `platform` from an index, skipping attestation manifests. */
export function selectPlatform(index: ImageIndex, platform: Platform): Descriptor {
  const candidates = index.manifests.filter(
    (m) =>
      m.platform?.os === platform.os &&
      m.platform.architecture === platform.architecture &&
      (platform.variant === undefined || m.platform.variant === platform.variant),
  );
  const found = candidates[0];
  if (!found) {
    const available = index.manifests
      .map((m) => (m.platform ? `${m.platform.os}/${m.platform.architecture}` : "unknown"))
      .join(", ");
    throw new SandtreeError(
      "IMAGE_NOT_FOUND",
      `image has no ${platform.os}/${platform.architecture} variant (has: ${available || "none"})`,
      { platform, available },
    );
  }
  return found;
}
