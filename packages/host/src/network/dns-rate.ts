/** The resolver's per-source token buckets (queries per second with bursts). */

const MAX_BUCKETS = 4096;

interface Bucket {
  tokens: number;
  at: number;
}

export class SourceRateLimit {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** False when over the rate limit, null when the source cannot even get a bucket. */
  take(src: string): boolean | null {
    const now = performance.now();
    let b = this.buckets.get(src);
    if (!b) {
      if (this.buckets.size >= MAX_BUCKETS) {
        // Forget sources whose bucket has refilled: they are indistinguishable from new ones.
        for (const [k, v] of this.buckets) {
          if (v.tokens + ((now - v.at) / 1000) * this.perSecond >= this.burst) this.buckets.delete(k);
        }
        if (this.buckets.size >= MAX_BUCKETS) return null;
      }
      b = { tokens: this.burst, at: now };
      this.buckets.set(src, b);
    }
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}
