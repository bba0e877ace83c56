import type { FileList, FileStat, PackedVolume } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";

/** What bounds a write through the file API: the volume's size and what it holds now. */
export interface VolumeWrite {
  /** The file's mode (default 0o644). */
  mode?: number;
  /** Bytes the volume may hold (its size_gb): a write past it is VOLUME_FULL and leaves nothing. */
  limitBytes: number;
  /** Bytes the volume holds now (the file written over included: it is replaced, not added to). */
  usedBytes: number;
  signal?: AbortSignal;
}

/** A write's result: the path as shown, bytes written, and the bytes of the file it replaced (0: none). */
export interface VolumeWritten {
  path: string;
  bytes: number;
  replaced: number;
}

/** A file's bytes from an offset: how many will come (checked to be a regular file first), then them. */
export interface VolumeRead {
  size: number;
  chunks: AsyncIterable<Uint8Array>;
}

type Sig = { signal?: AbortSignal };

/**
 * A volume's files moved through the blob store (a fleet's object store), like layers (HostLayers):
 * the host that holds the volume packs it there, and the host it moves to unpacks it, so a
 * volume's files never cross to the control plane. Keys are blob keys, volumes named as below.
 */
export interface VolumeArchives {
  /**
   * Packs the volume into the blob store under `key` (one tar): its tree as it is, or with
   * `snapshot` a consistent copy taken while sandboxes may write to it (frozen; VolumeImages.snapshot).
   */
  store(name: string, key: string, opts?: Sig & { snapshot?: boolean; sizeGb?: number }): Promise<PackedVolume>;
  /** The archive (its sha256 checked) as the volume's files, made (sizeGb) when it is not here, replacing what was. */
  fetch(archive: PackedVolume, name: string, sizeGb: number, opts?: Sig): Promise<void>;
}

/**
 * Volumes' storage, owned by the host that mounts them: each volume lies in the host's volumes
 * directory under its name (`<name>/data`, volumeDataDir), never named by a path across this port
 * (a name that is not flat: VALIDATION_FAILED, checkVolumeName). Paths inside a volume are the
 * file API's (volume-fs.ts: never following a symlink; FILE_NOT_FOUND, UNSAFE_PATH...).
 */
export interface HostVolumes {
  /** The volume's storage ready: made (its image of `sizeGb` where the host bounds volumes) when it has none, else mounted again. */
  create(name: string, sizeGb: number, opts?: Sig): Promise<void>;
  /** At a host's start: a volume made earlier mounted again (its image, when it has one); nothing is made. */
  open(name: string, opts?: Sig): Promise<void>;
  /** The volume's storage gone (unmounted, its files and image deleted). Idempotent. */
  remove(name: string, opts?: Sig): Promise<void>;
  /** Bytes of its regular files (apparent sizes: what size_gb bounds). */
  usedBytes(name: string, opts?: Sig): Promise<number>;
  /** `name` made as a copy of `source` (its image copied while frozen, or its tree), bounded at `sizeGb`. */
  snapshot(source: string, name: string, sizeGb: number, opts?: Sig): Promise<void>;
  stat(name: string, p: string, opts?: Sig): Promise<FileStat>;
  list(name: string, p: string, opts?: Sig): Promise<FileList>;
  read(name: string, p: string, opts?: Sig & { offset?: number; length?: number }): Promise<VolumeRead>;
  /** Streams `body` into the file (parents made), replacing it only once whole. */
  write(name: string, p: string, body: AsyncIterable<Uint8Array>, opts: VolumeWrite): Promise<VolumeWritten>;
  mkdir(name: string, p: string, opts: Sig & { parents: boolean; mode: number }): Promise<FileStat>;
  /** Removes a file, link or empty directory (with `recursive`, a tree). */
  removePath(name: string, p: string, opts: Sig & { recursive: boolean }): Promise<void>;
  /** Its archives port over `blobs` (a remote host's worker uses its own blob store, the fleet's). */
  archives(blobs: BlobStore): VolumeArchives;
}
