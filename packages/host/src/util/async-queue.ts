/**
 * An unbounded async queue between one producer and one consumer (the producer bounds it: exec
 * output and stdin by credit, events by their few kinds). `end` finishes it once what it holds
 * is taken; `fail` ends it with an error, thrown to the consumer after the items before it.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | null = null;
  private done = false;
  private failure: Error | null = null;

  push(item: T): void {
    if (this.done) return;
    this.items.push(item);
    this.wake();
  }

  end(): void {
    this.done = true;
    this.wake();
  }

  fail(err: Error): void {
    if (this.done) return;
    this.failure = err;
    this.done = true;
    this.wake();
  }

  get ended(): boolean {
    return this.done;
  }

  /** How many items wait to be taken. */
  get size(): number {
    return this.items.length;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** The next item, once there is one; done once ended and drained (or the failure thrown). */
  async next(): Promise<IteratorResult<T, undefined>> {
    for (;;) {
      if (this.items.length > 0) return { value: this.items.shift() as T, done: false };
      if (this.failure) throw this.failure;
      if (this.done) return { value: undefined, done: true };
      await new Promise<void>((r) => {
        this.waiter = r;
      });
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const r = await this.next();
      if (r.done) return;
      yield r.value;
    }
  }
}
