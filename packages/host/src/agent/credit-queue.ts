import { STREAM_WINDOW_BYTES } from "@sandtree/protocol";
import { AsyncQueue } from "../util/async-queue.js";
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
  private readonly queue = new AsyncQueue<{ item: T; bytes: number }>();
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
    if (this.queue.ended) return;
    this.outstanding += bytes;
    if (this.outstanding > this.credit) {
      throw new AgentProtocolError(`${this.opts.what()} sent ${this.outstanding} bytes against a credit of ${this.credit}`);
    }
    this.queue.push({ item, bytes });
  }

  end(): void {
    this.queue.end();
  }

  fail(err: Error): void {
    this.queue.fail(err);
  }

  get isEnded(): boolean {
    return this.queue.ended;
  }

  /** The next item; its bytes go back to the guest as credit, in batches (all of it once the queue is drained). */
  async next(): Promise<IteratorResult<T, undefined>> {
    const head = await this.queue.next();
    if (head.done) return head;
    const { item, bytes } = head.value;
    if (bytes > 0) {
      this.pendingGrant += bytes;
      if (this.pendingGrant >= this.grantBatch || this.queue.size === 0) {
        const g = this.pendingGrant;
        this.pendingGrant = 0;
        this.outstanding -= g;
        this.grant(g);
      }
    }
    return { value: item, done: false };
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next() };
  }
}
