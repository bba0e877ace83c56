import { rm } from "node:fs/promises";
import path from "node:path";
import { assertBlobKey, type BlobStore, LocalDirBlobStore } from "@sandtree/host";

/**
 * A worker's blob store: its data dir's layer directory until it joins, then the store its
 * control plane named (an S3 bucket, with that same directory as its local cache), so the
 * sandbox runtime can start (and learn its URL) before the join answers. Nothing stores a layer
 * before the join: the worker answers no call until it has the control plane's key.
 *
 * In a shared bucket the control plane owns the objects: a worker's delete (its checkpoint was
 * deleted, or expired) drops only its local copy. Another host may still restore from the object,
 * and the control plane deletes it once no checkpoint of the fleet needs it.
 */
export class JoinedBlobStore implements BlobStore {
  private inner: BlobStore;
  private shared = false;

  constructor(readonly localDir: string) {
    this.inner = new LocalDirBlobStore(localDir);
  }

  /** Switches to the control plane's store (its local directory must be this one). */
  use(store: BlobStore): void {
    if (store.localDir !== this.localDir) throw new Error(`a worker's blob store keeps its layers in ${this.localDir}`);
    const old = this.inner;
    this.inner = store;
    this.shared = true;
    old.close?.();
  }

  put(...a: Parameters<BlobStore["put"]>): ReturnType<BlobStore["put"]> {
    return this.inner.put(...a);
  }
  /**
   * A flattened layer has a new sha256: in a shared bucket the control plane's record, and every
   * other host's, would no longer match the object. So a joined worker keeps its chains as taken.
   */
  async replace(...a: Parameters<BlobStore["replace"]>): Promise<boolean> {
    if (!this.shared) return this.inner.replace(...a);
    await rm(a[1], { force: true });
    return false;
  }
  materialize(...a: Parameters<BlobStore["materialize"]>): ReturnType<BlobStore["materialize"]> {
    return this.inner.materialize(...a);
  }
  async delete(key: string): Promise<void> {
    if (!this.shared) return this.inner.delete(key);
    assertBlobKey(key);
    await rm(path.join(this.localDir, `.verified-${key}`), { force: true });
    await rm(path.join(this.localDir, key), { force: true });
  }
  stat(key: string): Promise<{ size: number } | null> {
    return this.inner.stat(key);
  }
  list(): Promise<string[]> {
    return this.inner.list();
  }
  close(): void {
    this.inner.close?.();
  }
}
