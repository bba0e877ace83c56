import { isFlatName } from "../util/flat-names.js";

/**
 * Durable storage of checkpoint layers: a local directory, or an S3-compatible bucket;
 * every implementation passes the conformance suite in packages/host/test/blob-store-conformance.ts.
 *
 * Layers reference their parent by a name relative to their own directory, so `localDir` is
 * where materialized layers live side by side (for a remote store: a local cache).
 */
export interface BlobStore {
  readonly localDir: string;
  /**
   * Stores `file` as `key`: moved atomically when it lies elsewhere on the same filesystem,
   * adopted in place when it already is the key's local file.
   */
  put(key: string, file: string, meta: { sha256: string; size: number }, opts?: { signal?: AbortSignal }): Promise<void>;
  /**
   * Swaps in `file` as the new content of `key` (the same guest-visible bytes under a new hash: a
   * flattened layer): stored durably first, then `commit()` records the new hash (false: give up,
   * `file` is removed), then the local copy is replaced. Returns what commit answered.
   */
  replace(
    key: string,
    file: string,
    meta: { sha256: string; size: number },
    commit: () => boolean | Promise<boolean>,
    opts?: { signal?: AbortSignal },
  ): Promise<boolean>;
  /**
   * A local path of the blob after checking its sha256 against `expectedSha256`;
   * throws BlobCorruptError on mismatch and BlobMissingError when absent.
   */
  materialize(key: string, expectedSha256: string, opts?: { signal?: AbortSignal }): Promise<string>;
  /** Removes the blob; succeeds when it is already gone. */
  delete(key: string): Promise<void>;
  stat(key: string): Promise<{ size: number } | null>;
  list(): Promise<string[]>;
  /** Releases connections (a remote store); the store is not used afterwards. */
  close?(): void;
}

export class BlobCorruptError extends Error {
  constructor(
    readonly key: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`blob ${key} is corrupt: sha256 ${actual.slice(0, 12)}... != recorded ${expected.slice(0, 12)}...`);
    this.name = "BlobCorruptError";
  }
}

export class BlobMissingError extends Error {
  constructor(readonly key: string) {
    super(`blob ${key} is missing from the store`);
    this.name = "BlobMissingError";
  }
}

/** The longest blob key. */
export const BLOB_KEY_MAX = 201;

/** Keys are flat file names (isFlatName): letters, digits, '.', '_', '-'. */
export function assertBlobKey(key: string): void {
  if (!isFlatName(key, BLOB_KEY_MAX)) {
    throw new Error(`invalid blob key ${JSON.stringify(key)}`);
  }
}
