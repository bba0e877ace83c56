import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { BlobStore } from "../blobs/blob-store.js";
import { BlobLayers, checkLayerName, type HostLayers, type LayerDigest } from "../machine/host-layers.js";
import { LayerDirectory } from "../machine/layer-files.js";
import type { HostDisks } from "../machine/machine.js";

/**
 * A fake disk file: small JSON. A writable disk names its backing and holds no files until a
 * checkpoint writes the machine's whole file map into it (a layer is self-contained: reads never
 * walk the chain past the nearest layer with files). Real files, so the blob store and the
 * server's sealing and collection work on them as on real layers.
 */
export interface FakeDiskFile {
  fake: 1;
  backing: string | null;
  /** path -> base64 content; null: nothing written here yet (read the backing). */
  files: Record<string, string> | null;
}

export function readDiskFile(file: string): FakeDiskFile | null {
  try {
    const d = JSON.parse(readFileSync(file, "utf8")) as FakeDiskFile;
    return d && d.fake === 1 ? d : null;
  } catch {
    return null;
  }
}

export function writeDiskFile(file: string, d: FakeDiskFile): void {
  writeFileSync(file, JSON.stringify(d));
}

/** The files a disk shows: its own, or its nearest ancestor's that has them (an image base: none). */
export function filesOf(disk: string): Map<string, Buffer> {
  const dir = path.dirname(disk);
  let file: string | null = disk;
  for (let hops = 0; file && hops < 100_000; hops++) {
    const d = readDiskFile(file);
    if (!d) break;
    if (d.files) return new Map(Object.entries(d.files).map(([k, v]) => [k, Buffer.from(v, "base64")]));
    file = d.backing ? path.join(dir, d.backing) : null;
  }
  return new Map();
}

export function encodeFiles(files: Map<string, Buffer>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of files) out[k] = v.toString("base64");
  return out;
}

/** A fake layer's sha256 and size (nothing to fsync: a test's files). */
async function sealFakeLayer(file: string, opts: { signal?: AbortSignal } = {}): Promise<LayerDigest> {
  opts.signal?.throwIfAborted();
  const data = readFileSync(file);
  return { sha256: createHash("sha256").update(data).digest("hex"), size: data.length };
}

/**
 * The fake host's disks, in its layers directory and named there (as a real host's: checkLayerName);
 * an image base is linked as a real host's (LayerDirectory): the link dangles once the base is gone.
 */
export abstract class FakeDisks extends LayerDirectory implements HostDisks {
  constructor(private readonly layersDirOf: () => string) {
    super();
  }

  get layersDir(): string {
    return this.layersDirOf();
  }

  async createDisk(backing: string, disk: string, _sizeBytes: number): Promise<void> {
    const file = this.file(disk, "disk");
    checkLayerName(backing, "backing");
    mkdirSync(this.layersDir, { recursive: true });
    writeDiskFile(file, { fake: 1, backing, files: null });
  }

  /** Its layers as any host's: a fake layer's bytes hashed where they lie, then stored. */
  layers(blobs: BlobStore): HostLayers {
    return new BlobLayers(this.layersDir, blobs, sealFakeLayer);
  }

  async flattenLayer(layer: string, backing: string, dest: string, opts: { signal?: AbortSignal } = {}): Promise<LayerDigest> {
    const [from, to] = [this.file(layer, "layer"), this.file(dest, "dest")];
    writeDiskFile(to, { fake: 1, backing: checkLayerName(backing, "backing"), files: encodeFiles(filesOf(from)) });
    return sealFakeLayer(to, opts);
  }
}
