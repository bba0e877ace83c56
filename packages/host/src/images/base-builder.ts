import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { throwIfAborted } from "../util/run-command.js";
import type { ImageSource, ResolvedManifest } from "./image-source.js";
import { applyLayers } from "./layers.js";
import { type ImageRuntimeConfig, parseJson, parseRuntimeConfig } from "./oci-types.js";
import { buildBaseImage } from "./rootfs-image.js";

/** What the store keeps next to each base.qcow2. */
export interface BaseMeta {
  digest: string;
  virtualSizeBytes: number;
  config: ImageRuntimeConfig;
  createdAt: string;
  origin: string;
}

export const BASE_FILE = "base.qcow2";
const META_FILE = "meta.json";
const DOWNLOAD_CONCURRENCY = 3;

export async function readBaseMeta(dir: string): Promise<BaseMeta | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, META_FILE), "utf8")) as BaseMeta;
  } catch {
    return undefined;
  }
}

/**
 * Builds into a private temp dir, then renames it to `destDir` in one step, so a reader sees
 * either no base or a complete one. When another builder won the race its base is kept.
 */
async function installAtomically(
  workRoot: string,
  destDir: string,
  build: (outDir: string, scratch: string) => Promise<Omit<BaseMeta, "createdAt">>,
): Promise<BaseMeta> {
  await mkdir(workRoot, { recursive: true });
  const scratch = await mkdtemp(join(workRoot, "build-"));
  try {
    const outDir = join(scratch, "out");
    await mkdir(outDir);
    const meta: BaseMeta = { ...(await build(outDir, scratch)), createdAt: new Date().toISOString() };
    await writeFile(join(outDir, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    await mkdir(join(destDir, ".."), { recursive: true });
    try {
      await rename(outDir, destDir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "EEXIST" && code !== "ENOTEMPTY") throw e;
      const existing = await readBaseMeta(destDir);
      if (existing) return existing;
      throw e;
    }
    return meta;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

export interface BuildOptions {
  /** Where temp dirs go; must be on the same filesystem as `destDir` for the final rename. */
  workRoot: string;
  signal?: AbortSignal | undefined;
}

/** Downloads config and layers from `source`, applies the layers and builds the qcow2 base. */
export function buildBaseFromSource(
  source: ImageSource,
  resolved: ResolvedManifest,
  destDir: string,
  opts: BuildOptions,
): Promise<BaseMeta> {
  const { signal } = opts;
  return installAtomically(opts.workRoot, destDir, async (outDir, scratch) => {
    const { manifest } = resolved;
    const configPath = join(scratch, "config.json");
    await source.fetchBlob(manifest.config, configPath, signal ? { signal } : {});
    const config = parseRuntimeConfig(parseJson(await readFile(configPath), "image config"));
    const layerDir = join(scratch, "layers");
    await mkdir(layerDir);
    const paths = manifest.layers.map((_, i) => join(layerDir, String(i)));
    // Download a few layers at a time; apply strictly in order as each arrives.
    const downloads: Promise<void>[] = [];
    let next = 0;
    const startNext = (): void => {
      const i = next++;
      const layer = manifest.layers[i];
      const path = paths[i];
      if (!layer || !path) return;
      const p = source.fetchBlob(layer, path, signal ? { signal } : {});
      p.catch(() => undefined);
      downloads[i] = p;
    };
    for (let i = 0; i < DOWNLOAD_CONCURRENCY; i++) startNext();
    const rootfs = join(scratch, "rootfs");
    await mkdir(rootfs);
    for (let i = 0; i < paths.length; i++) {
      await downloads[i];
      startNext();
      throwIfAborted(signal);
      await applyLayers([paths[i] ?? ""], rootfs, { workDir: scratch, signal });
      await rm(paths[i] ?? "", { force: true });
    }
    const built = await buildBaseImage(rootfs, join(outDir, "base.qcow2"), { signal });
    await rm(rootfs, { recursive: true, force: true });
    return { digest: resolved.digest, virtualSizeBytes: built.virtualSizeBytes, config, origin: source.description };
  });
}

/** Builds a base straight from a root filesystem directory (no OCI layers involved). */
export function buildBaseFromRootfs(
  rootfs: string,
  digestFor: (qcow2Path: string) => Promise<string>,
  destDirFor: (digest: string) => string,
  config: ImageRuntimeConfig,
  opts: BuildOptions,
): Promise<BaseMeta> {
  const { signal } = opts;
  // The digest (of the qcow2) is only known after building, so build first, then install.
  return (async () => {
    await mkdir(opts.workRoot, { recursive: true });
    const scratch = await mkdtemp(join(opts.workRoot, "rootfs-"));
    try {
      const built = await buildBaseImage(rootfs, join(scratch, BASE_FILE), { signal });
      const digest = await digestFor(built.path);
      return await installAtomically(opts.workRoot, destDirFor(digest), async (outDir) => {
        await rename(built.path, join(outDir, BASE_FILE));
        return { digest, virtualSizeBytes: built.virtualSizeBytes, config, origin: `rootfs:${rootfs}` };
      });
    } catch (e) {
      if (e instanceof SandtreeError || signal?.aborted) throw e;
      throw new SandtreeError("IMAGE_INVALID", `cannot build an image from ${rootfs}: ${(e as Error).message}`);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  })();
}
