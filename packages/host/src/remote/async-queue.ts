/**
 * An unbounded async queue of messages for one RPC stream (the sender bounds it: exec output and
 * stdin by credit, events by their few kinds). `end` finishes it; `fail` ends it with an error.
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

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.done) {
        if (this.failure) throw this.failure;
        return;
      }
      await new Promise<void>((r) => {
        this.waiter = r;
      });
    }
  }
}

/** A counter of bytes one side may still send, with a wait for more. */
export class Credit {
  private waiters: Array<() => void> = [];
  private closed = false;

  constructor(private available: number) {}

  add(n: number): void {
    this.available += n;
    for (const w of this.waiters.splice(0)) w();
  }

  /** Takes `n` once that much is available (at once if it is); false once closed. */
  async take(n: number): Promise<boolean> {
    while (!this.closed && this.available < n) await new Promise<void>((r) => this.waiters.push(r));
    if (this.closed) return false;
    this.available -= n;
    return true;
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
  }
}
