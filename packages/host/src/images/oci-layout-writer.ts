import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { runCommand } from "../util/run-command.js";
import { digestHex, sha256Bytes, sha256File } from "./digest.js";
import {
  DEFAULT_PLATFORM,
  type Descriptor,
  type ImageRuntimeConfig,
  MediaType,
  type Platform,
  parseIndex,
  parseJson,
  REF_NAME_ANNOTATION,
} from "./oci-types.js";

export type LayerCompression = "gzip" | "zstd" | "none";

export interface LayerSpec {
  /** A directory whose contents become the layer (whiteouts are plain `.wh.NAME` files in it). */
  dir: string;
  compression?: LayerCompression;
}

export interface ImageSpec {
  layers: LayerSpec[];
  platform?: Platform;
  config?: Partial<ImageRuntimeConfig>;
}

export interface WriteLayoutOptions {
  /** Recorded as the entry's `org.opencontainers.image.ref.name` (the tag in `oci:DIR:TAG`). */
  refName?: string;
  signal?: AbortSignal;
}

const LAYER_MEDIA: Record<LayerCompression, string> = {
  gzip: MediaType.ociLayerGzip,
  zstd: MediaType.ociLayerZstd,
  none: MediaType.ociLayer,
};

/**
 * Writes one image (or, with several specs, a multi-platform index) into an OCI layout at
 * `outDir`, adding to an existing layout's index.json. Returns the new entry's descriptor.
 */
export async function writeOciLayout(outDir: string, images: ImageSpec[], opts: WriteLayoutOptions = {}): Promise<Descriptor> {
  if (images.length === 0) throw new TypeError("writeOciLayout: no images");
  await mkdir(join(outDir, "blobs", "sha256"), { recursive: true });
  await writeFile(join(outDir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  const manifests: Descriptor[] = [];
  for (const image of images) manifests.push(await writeImage(outDir, image, opts.signal));
  let entry: Descriptor;
  if (manifests.length === 1 && manifests[0]) {
    entry = manifests[0];
  } else {
    const index = { schemaVersion: 2, mediaType: MediaType.ociIndex, manifests };
    entry = await writeJsonBlob(outDir, MediaType.ociIndex, index);
  }
  if (opts.refName !== undefined) entry.annotations = { [REF_NAME_ANNOTATION]: opts.refName };
  await addToIndex(outDir, entry);
  return entry;
}

/** The common case: a single-layer image from a root filesystem directory. */
export function writeRootfsLayout(
  rootfsDir: string,
  outDir: string,
  opts: WriteLayoutOptions & { compression?: LayerCompression } = {},
): Promise<Descriptor> {
  return writeOciLayout(outDir, [{ layers: [{ dir: rootfsDir, compression: opts.compression ?? "gzip" }] }], opts);
}

async function writeImage(outDir: string, image: ImageSpec, signal?: AbortSignal): Promise<Descriptor> {
  const platform = image.platform ?? DEFAULT_PLATFORM;
  const layers: Descriptor[] = [];
  const diffIds: string[] = [];
  for (const layer of image.layers) {
    const { descriptor, diffId } = await writeLayer(outDir, layer, signal);
    layers.push(descriptor);
    diffIds.push(diffId);
  }
  const c = image.config ?? {};
  const config = {
    architecture: platform.architecture,
    os: platform.os,
    ...(platform.variant ? { variant: platform.variant } : {}),
    config: {
      Env: c.env ?? ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
      ...(c.entrypoint ? { Entrypoint: c.entrypoint } : {}),
      Cmd: c.cmd ?? ["/bin/sh"],
      WorkingDir: c.workingDir ?? "/",
      ...(c.user ? { User: c.user } : {}),
      ...(c.labels && Object.keys(c.labels).length > 0 ? { Labels: c.labels } : {}),
    },
    rootfs: { type: "layers", diff_ids: diffIds },
  };
  const configDesc = await writeJsonBlob(outDir, MediaType.ociConfig, config);
  const manifest = { schemaVersion: 2, mediaType: MediaType.ociManifest, config: configDesc, layers };
  const desc = await writeJsonBlob(outDir, MediaType.ociManifest, manifest);
  desc.platform = { ...platform };
  return desc;
}

async function writeLayer(
  outDir: string,
  layer: LayerSpec,
  signal?: AbortSignal,
): Promise<{ descriptor: Descriptor; diffId: string }> {
  const compression = layer.compression ?? "gzip";
  const tmp = await mkdtemp(join(outDir, ".layer-"));
  try {
    const tarPath = join(tmp, "layer.tar");
    await runCommand(
      [
        "tar",
        "--create",
        "--file",
        tarPath,
        "--format=pax",
        "--numeric-owner",
        "--xattrs",
        "--xattrs-include=*",
        "--sort=name",
        "-C",
        layer.dir,
        ".",
      ],
      { signal, errorCode: "HOST_COMMAND_FAILED" },
    );
    const diffId = await sha256File(tarPath, signal ? { signal } : {});
    let blobPath = tarPath;
    if (compression === "gzip") {
      blobPath = join(tmp, "layer.tar.gz");
      await pipeline(createReadStream(tarPath), createGzip(), createWriteStream(blobPath), signal ? { signal } : {});
    } else if (compression === "zstd") {
      blobPath = join(tmp, "layer.tar.zst");
      await runCommand(["zstd", "-q", "-f", "-3", "-o", blobPath, tarPath], { signal, errorCode: "HOST_COMMAND_FAILED" });
    }
    const digest = await sha256File(blobPath, signal ? { signal } : {});
    const { size } = await stat(blobPath);
    await rename(blobPath, join(outDir, "blobs", "sha256", digestHex(digest)));
    return { descriptor: { mediaType: LAYER_MEDIA[compression], digest, size }, diffId };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

async function writeJsonBlob(outDir: string, mediaType: string, value: unknown): Promise<Descriptor> {
  const bytes = Buffer.from(JSON.stringify(value));
  const digest = sha256Bytes(bytes);
  await writeFile(join(outDir, "blobs", "sha256", digestHex(digest)), bytes);
  return { mediaType, digest, size: bytes.length };
}

async function addToIndex(outDir: string, entry: Descriptor): Promise<void> {
  const path = join(outDir, "index.json");
  let manifests: Descriptor[] = [];
  try {
    manifests = parseIndex(parseJson(await readFile(path), "index.json")).manifests;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  const name = entry.annotations?.[REF_NAME_ANNOTATION];
  if (name !== undefined) manifests = manifests.filter((m) => m.annotations?.[REF_NAME_ANNOTATION] !== name);
  manifests.push(entry);
  const tmp = `${path}.tmp`;
  await writeFile(tmp, JSON.stringify({ schemaVersion: 2, mediaType: MediaType.ociIndex, manifests }));
  await rename(tmp, path);
}
