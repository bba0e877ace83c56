import { rm } from "node:fs/promises";
import path from "node:path";
import { assertBlobKey, type BlobStore, LocalDirBlobStore } from "@sandtree/host";

/**
 * A worker's blob store: its data dir's layer directory until it joins, then the store its
 * control plane named (an S3 bucket, with that same directory as its local cache), so the
 * sandbox runtime can start (and learn its URL) before the join answers. No new checkpoint is
 * taken before the join (the worker answers no call until it has the control plane's key), but one
 * a restart interrupted is sealed again at start: its upload waits for the join, so it becomes
 * DURABLE only once it is where the control plane said.
 *
 * In a shared bucket the control plane owns the objects: a worker's delete (its checkpoint was
 * deleted, or expired) drops only its local copy. Another host may still restore from the object,
 * and the control plane deletes it once no checkpoint of the fleet needs it.
 */
export class JoinedBlobStore implements BlobStore {
  private inner: BlobStore;
  private shared = false;
  private decided = false;
  private settle: () => void = () => {};
  private readonly joined = new Promise<void>((resolve) => {
    this.settle = resolve;
  });

  constructor(readonly localDir: string) {
    this.inner = new LocalDirBlobStore(localDir);
  }

  /** The control plane keeps layers in a directory of its own: this worker keeps its own here. */
  keepLocal(): void {
    this.decided = true;
    this.settle();
  }

  /** Resolves once the join decided where layers go; an abort (the server stopping) gives up. */
  private async decision(signal: AbortSignal): Promise<void> {
    if (this.decided) return;
    signal.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      void this.joined.then(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }

  /** Switches to the control plane's store (its local directory must be this one). */
  use(store: BlobStore): void {
    if (store.localDir !== this.localDir) throw new Error(`a worker's blob store keeps its layers in ${this.localDir}`);
    const old = this.inner;
    this.inner = store;
    this.shared = true;
    this.decided = true;
    this.settle();
    old.close?.();
  }

  /** An upload (it has a signal) waits for the join; a repair at start without one goes where layers are now. */
  async put(...a: Parameters<BlobStore["put"]>): Promise<void> {
    const signal = a[3]?.signal;
    if (signal) await this.decision(signal);
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
