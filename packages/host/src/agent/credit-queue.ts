import { STREAM_WINDOW_BYTES } from "@sandtree/protocol";
import { AgentProtocolError } from "./guest-error.js";

export interface CreditQueueOptions {
  /** Names the stream in a violation report. */
  what: () => string;
  /** The guest's initial credit: the data bytes it may have sent that were not handed back yet. */
  credit?: number;
  grantBatch?: number;
}

/**
 * An async queue between the agent connection and one consumer. Data items carry a byte
 * count; as the consumer takes them, credit is handed back to the guest (flow control), so a
 * consumer that stops reading stops the guest's producer instead of growing this queue.
 * A guest that sends past its credit (only a replaced agent does) would grow it without bound:
 * `push` then throws AgentProtocolError.
 */
export class CreditQueue<T> implements AsyncIterable<T> {
  private items: Array<{ item: T; bytes: number }> = [];
  private waiter: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;
  private pendingGrant = 0;
  /** Data bytes the guest sent that were not handed back as credit. */
  private outstanding = 0;
  private readonly credit: number;
  private readonly grantBatch: number;

  constructor(
    private readonly grant: (bytes: number) => void,
    private readonly opts: CreditQueueOptions,
  ) {
    this.credit = opts.credit ?? STREAM_WINDOW_BYTES;
    this.grantBatch = opts.grantBatch ?? 64 * 1024;
  }

  push(item: T, bytes = 0): void {
    if (this.ended) return;
    this.outstanding += bytes;
    if (this.outstanding > this.credit) {
      throw new AgentProtocolError(`${this.opts.what()} sent ${this.outstanding} bytes against a credit of ${this.credit}`);
    }
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
            this.outstanding -= g;
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
