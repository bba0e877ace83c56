import { RateLimitError, type Sandbox, type SandtreeClient } from "@sandtree/sdk";

const WINDOW_MS = 10_500; // the server's window is 10 s; the extra half second absorbs clock skew

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Creation pacing: at most `creationsPer10s` creates in any 10 s window, and a 429 (a quota or
 * rate limit the pacing did not foresee) waited out here instead of reaching the caller.
 */
export class Pacer {
  private readonly times: number[] = [];
  /** 429s waited out (the caller never saw them). */
  rateLimited = 0;

  constructor(
    readonly creationsPer10s?: number,
    readonly maxWaitMs = 3_600_000,
  ) {}

  private async reserve(): Promise<void> {
    const limit = this.creationsPer10s;
    if (!limit) return;
    for (;;) {
      const t = Date.now();
      while (this.times.length > 0 && t - (this.times[0] ?? 0) >= WINDOW_MS) this.times.shift();
      if (this.times.length < limit) {
        this.times.push(t);
        return;
      }
      await sleep(Math.max(10, (this.times[0] ?? t) + WINDOW_MS - t));
    }
  }

  async create(client: SandtreeClient, request: Parameters<SandtreeClient["sandboxes"]["create"]>[0]): Promise<Sandbox> {
    const deadline = Date.now() + this.maxWaitMs;
    for (let attempt = 1; ; attempt++) {
      await this.reserve();
      try {
        return await client.sandboxes.create(request);
      } catch (err) {
        if (!(err instanceof RateLimitError)) throw err;
        this.rateLimited++;
        const wait = (err.retryAfterMs ?? Math.min(8000, 250 * 2 ** attempt)) + Math.random() * 250;
        if (Date.now() + wait > deadline) throw err;
        await sleep(wait);
      }
    }
  }
}
