import { ConnectionError, RateLimitError, SandtreeApiError } from "./errors.js";

/** How failed requests are retried: 429, 5xx and connection errors, with exponential backoff and jitter. */
export interface RetryOptions {
  /** Attempts in all, the first one included (default 5; 1 disables retries). */
  maxAttempts?: number;
  /** Backoff before the second attempt (default 250 ms); it doubles per attempt. */
  initialDelayMs?: number;
  /** Cap of one backoff (default 8 s). */
  maxDelayMs?: number;
  /** A Retry-After longer than this is not waited for: the error is thrown (default 60 s). */
  maxRetryAfterMs?: number;
}

export type ResolvedRetry = Required<RetryOptions>;

export const DEFAULT_RETRY: ResolvedRetry = {
  maxAttempts: 5,
  initialDelayMs: 250,
  maxDelayMs: 8000,
  maxRetryAfterMs: 60_000,
};

const RETRIED_STATUSES = new Set([500, 502, 503, 504]);

/**
 * Whether a failed attempt may be sent again. A 429 and a refused connection never reached the
 * handler, so any request may be resent; other 5xx and broken connections only when resending
 * cannot do the work twice (`idempotent`: GET/PUT/DELETE, or a create carrying an idempotency key).
 */
export function retryable(err: unknown, idempotent: boolean): boolean {
  if (err instanceof RateLimitError) return true;
  if (err instanceof SandtreeApiError) return idempotent && RETRIED_STATUSES.has(err.status);
  if (err instanceof ConnectionError) return idempotent || causeCode(err) === "ECONNREFUSED";
  return false;
}

/** The wait before attempt `attempt + 1` (attempt counts from 1); undefined: do not retry. */
export function retryDelay(err: unknown, attempt: number, policy: ResolvedRetry, random = Math.random): number | undefined {
  if (err instanceof RateLimitError && err.retryAfterMs !== undefined) {
    if (err.retryAfterMs > policy.maxRetryAfterMs) return undefined;
    // The server said when: wait that long, plus a little jitter so clients do not stampede.
    return err.retryAfterMs + Math.floor(random() * Math.min(1000, policy.initialDelayMs));
  }
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
  // "Equal jitter": half fixed, half random, so waits grow but never line up across clients.
  return Math.floor(ceiling / 2 + random() * (ceiling / 2));
}

function causeCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("E")) return code;
  }
  return undefined;
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
