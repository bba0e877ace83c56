/**
 * Runs async read-modify-write sections one at a time per key (the store's calls are async, so
 * two requests could otherwise interleave between a read and the write that depends on it).
 * Only within this process: what must hold across servers uses the store's conditional updates.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => {});
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}
