import { rm } from "node:fs/promises";
import path from "node:path";
import type { FileList, FileStat, PackedVolume } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";
import type { HostVolumes, VolumeArchives, VolumeRead, VolumeWrite, VolumeWritten } from "./host-volumes.js";
import { packVolume, unpackVolume } from "./volume-archive.js";
import { volumeDataDir } from "./volume-dirs.js";
import { VolumeFiles } from "./volume-files.js";
import { VolumeImages } from "./volume-image.js";
import { snapshotInto } from "./volume-snapshots.js";

/**
 * The volumes port over a local volumes directory (the QEMU host's, the fake host's): each volume
 * `<root>/<name>/data` (volumeDataDir), bounded by its image where `images` bound volumes.
 */
export class LocalVolumes implements HostVolumes {
  /**
   * `root`: the volumes directory (a function: a host that makes its folder when first needed);
   * `images`: how volumes are bounded (default: not at all, by the host's disk only).
   */
  constructor(
    private readonly root: () => string,
    private images?: VolumeImages,
  ) {}

  private get bound(): VolumeImages {
    this.images ??= new VolumeImages({ volumesDir: this.root(), volumeBound: "none" });
    return this.images;
  }

  private dir(name: string): string {
    return volumeDataDir(this.root(), name);
  }

  private files(name: string): VolumeFiles {
    return new VolumeFiles(this.dir(name));
  }

  async create(name: string, sizeGb: number): Promise<void> {
    return this.bound.ensure(this.dir(name), sizeGb);
  }

  async open(name: string): Promise<void> {
    return this.bound.mount(this.dir(name));
  }

  async remove(name: string): Promise<void> {
    const dir = this.dir(name);
    await this.bound.unmount(dir);
    await rm(path.dirname(dir), { recursive: true, force: true });
  }

  async usedBytes(name: string): Promise<number> {
    return this.files(name).usedBytes();
  }

  async snapshot(source: string, name: string, sizeGb: number): Promise<void> {
    return snapshotInto(this.bound, this.dir(source), this.dir(name), sizeGb);
  }

  async stat(name: string, p: string): Promise<FileStat> {
    return this.files(name).stat(p);
  }

  async list(name: string, p: string): Promise<FileList> {
    return this.files(name).list(p);
  }

  async read(name: string, p: string, opts: { offset?: number; length?: number } = {}): Promise<VolumeRead> {
    return this.files(name).download(p, opts);
  }

  async write(name: string, p: string, body: AsyncIterable<Uint8Array>, o: VolumeWrite): Promise<VolumeWritten> {
    let replaced = 0;
    const out = await this.files(name).upload(p, body, o.mode ?? 0o644, {
      volumeId: name,
      limitBytes: o.limitBytes,
      usedOthers: (existing) => {
        replaced = existing;
        return o.usedBytes - existing;
      },
    });
    return { ...out, replaced };
  }

  async mkdir(name: string, p: string, o: { parents: boolean; mode: number }): Promise<FileStat> {
    return this.files(name).mkdir(p, o.parents, o.mode);
  }

  async removePath(name: string, p: string, o: { recursive: boolean }): Promise<void> {
    return this.files(name).remove(p, o.recursive);
  }

  archives(blobs: BlobStore): VolumeArchives {
    return {
      store: async (name, key, o = {}) => {
        const dir = this.dir(name);
        if (!o.snapshot) return packVolume(blobs, dir, key, o.signal);
        // A consistent copy beside it (`<name>.sync`), packed, then removed; one a crash left goes first.
        const copy = `${name}.sync`;
        await this.remove(copy);
        try {
          await this.snapshot(name, copy, o.sizeGb ?? 1);
          return await packVolume(blobs, this.dir(copy), key, o.signal);
        } finally {
          await this.remove(copy).catch(() => {});
        }
      },
      fetch: async (archive: PackedVolume, name: string, sizeGb: number, o = {}) => {
        await this.create(name, sizeGb);
        await unpackVolume(blobs, archive, this.dir(name), o.signal);
      },
    };
  }
}
