/**
 * An async queue between the agent connection and one consumer. Data items carry a byte
 * count; as the consumer takes them, credit is handed back to the guest (flow control), so a
 * consumer that stops reading stops the guest's producer instead of growing this queue.
 */
export class CreditQueue<T> implements AsyncIterable<T> {
  private items: Array<{ item: T; bytes: number }> = [];
  private waiter: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;
  private pendingGrant = 0;

  constructor(
    private readonly grant: (bytes: number) => void,
    private readonly grantBatch = 64 * 1024,
  ) {}

  push(item: T, bytes = 0): void {
    if (this.ended) return;
    this.items.push({ item, bytes });
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  fail(err: Error): void {
    if (this.ended) return;
    this.failure = err;
    this.ended = true;
    this.wake();
  }

  get isEnded(): boolean {
    return this.ended;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      const head = this.items.shift();
      if (head) {
        if (head.bytes > 0) {
          this.pendingGrant += head.bytes;
          if (this.pendingGrant >= this.grantBatch || this.items.length === 0) {
            const g = this.pendingGrant;
            this.pendingGrant = 0;
            this.grant(g);
          }
        }
        return { value: head.item, done: false };
      }
      if (this.failure) throw this.failure;
      if (this.ended) return { value: undefined, done: true };
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next() };
  }
}
