import { existsSync } from "node:fs";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { BLOB_KEY_MAX, BlobCorruptError, BlobMissingError, type BlobStore } from "../blobs/blob-store.js";
import { checkFlatName } from "../util/flat-names.js";

/** What a stored layer (or memory state) is: its sha256 and size in bytes. */
export interface LayerDigest {
  sha256: string;
  size: number;
}

/**
 * Layers between a host's layers directory (the blob store's `localDir`) and the blob store: the
 * host that holds a layer's file stores it, and fetches a layer it lacks, so layer files never
 * cross to the control plane. Keys are names in the layers directory, never paths (a key that is
 * not a flat name: VALIDATION_FAILED). A remote host's worker stores into its own blob store,
 * which is the fleet's one (a worker joins only with the control plane's: BLOB_STORE_MISMATCH).
 */
export interface HostLayers {
  /**
   * Makes the frozen layer or memory state file `key` durable where it lies (fsync), hashes it,
   * and puts it in the blob store (for a remote store: uploaded) before resolving.
   */
  store(key: string, opts?: { signal?: AbortSignal }): Promise<LayerDigest>;
  /**
   * Makes sure `key` lies in the layers directory with `sha256` (downloaded from the blob store
   * when missing here). A mismatch, or a blob the store does not hold: CHECKPOINT_CORRUPT.
   */
  fetch(key: string, sha256: string, opts?: { signal?: AbortSignal }): Promise<void>;
  /**
   * Swaps the layer file `from` (a flattened layer: the same guest-visible bytes as `key`, with
   * `digest`) in as `key`'s content: stored in the blob store first, then `commit()` records the new
   * hash (false: give up, `from` is removed), then `from` replaces `key` in the layers directory.
   * Returns what commit answered (BlobStore.replace).
   */
  replace(
    key: string,
    from: string,
    digest: LayerDigest,
    commit: () => boolean | Promise<boolean>,
    opts?: { signal?: AbortSignal },
  ): Promise<boolean>;
  /**
   * Stores the file `from` as `key` (it may be `key` itself) when it holds `sha256`: it becomes
   * `key` in the layers directory and in the blob store (a swap a restart interrupted after its
   * commit, or a layer stored again). False, nothing changed, when it is missing or holds other bytes.
   */
  storeAs(key: string, from: string, sha256: string, opts?: { signal?: AbortSignal }): Promise<boolean>;
}

/** How a host makes one of its layer files durable and hashes it (qcow2 or fake, the same bytes). */
export type SealFile = (file: string, opts?: { signal?: AbortSignal }) => Promise<LayerDigest>;

/**
 * `name` when it names a file in a host's layers directory (a layer key, a disk, a memory state):
 * a flat name (checkFlatName, as a blob key: no `/`, no `..`); else VALIDATION_FAILED on `field`. Every host
 * checks a name the caller gives before it joins it with its own layers directory.
 */
export function checkLayerName(name: string, field = "key"): string {
  return checkFlatName(name, { max: BLOB_KEY_MAX, field, what: `${field} (a name in the layers directory)` });
}

/** The file `name` (checked: checkLayerName) in the layers directory `dir`. */
export function layerFile(dir: string, name: string, field?: string): string {
  return path.join(dir, checkLayerName(name, field));
}

/**
 * The layers port of a host whose layers directory is `layersDir` (QEMU's, the fake's): its blob
 * store keeps its local files there (`blobs.localDir`), or the two would disagree on what a key is.
 */
export class BlobLayers implements HostLayers {
  constructor(
    layersDir: string,
    private readonly blobs: BlobStore,
    private readonly seal: SealFile,
  ) {
    if (path.resolve(blobs.localDir) !== path.resolve(layersDir))
      throw new Error(`a host's layers port needs a blob store over its layers directory ${layersDir} (got ${blobs.localDir})`);
  }

  async store(key: string, opts: { signal?: AbortSignal } = {}): Promise<LayerDigest> {
    const file = layerFile(this.blobs.localDir, key);
    const digest = await this.seal(file, opts);
    opts.signal?.throwIfAborted();
    await this.blobs.put(key, file, digest, opts);
    return digest;
  }

  async fetch(key: string, sha256: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    try {
      await this.blobs.materialize(checkLayerName(key), sha256, opts);
    } catch (err) {
      if (!(err instanceof BlobCorruptError || err instanceof BlobMissingError)) throw err;
      throw new SandtreeError("CHECKPOINT_CORRUPT", err.message, { key }, { cause: err });
    }
  }

  async replace(
    key: string,
    from: string,
    digest: LayerDigest,
    commit: () => boolean | Promise<boolean>,
    opts: { signal?: AbortSignal } = {},
  ): Promise<boolean> {
    const file = layerFile(this.blobs.localDir, from, "from");
    return this.blobs.replace(checkLayerName(key), file, digest, commit, opts);
  }

  async storeAs(key: string, from: string, sha256: string, opts: { signal?: AbortSignal } = {}): Promise<boolean> {
    const file = layerFile(this.blobs.localDir, from, "from");
    checkLayerName(key);
    if (!existsSync(file)) return false;
    const digest = await this.seal(file, opts);
    if (digest.sha256 !== sha256) return false;
    await this.blobs.put(key, file, digest, opts);
    return true;
  }
}
