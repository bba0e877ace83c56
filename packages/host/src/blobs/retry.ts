import { setTimeout as sleep } from "node:timers/promises";
import { BlobCorruptError, BlobMissingError } from "./blob-store.js";

const TRANSIENT_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ERR_STREAM_PREMATURE_CLOSE",
]);

/** A failure worth another try (e.g. an upload that did not verify: a stale read can explain it). */
export class TransientError extends Error {
  override name = "TransientError";
}

/**
 * Whether an object-store call may succeed when tried again: network failures, a stream cut
 * short, throttling and server errors. A verdict about the bytes (corrupt, missing) and a
 * refusal (4xx: credentials, bucket) are final.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof BlobCorruptError || err instanceof BlobMissingError) return false;
  const e = err as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  if (err instanceof TransientError) return true;
  if (e?.name === "AbortError") return false;
  const status = e?.$metadata?.httpStatusCode;
  if (status !== undefined) return status >= 500 || status === 429 || status === 408;
  if (e?.code && TRANSIENT_CODES.has(e.code)) return true;
  return /socket hang up|aborted|ECONNRESET|ECONNREFUSED|premature close|TimeoutError|timed out/i.test(
    `${e?.name ?? ""} ${e?.message ?? ""}`,
  );
}

/**
 * Runs `fn` until it succeeds, a non-transient error, or `attempts` tries, backing off
 * exponentially (with jitter) between tries; the signal ends the wait at once.
 */
export async function withRetries<T>(
  fn: (attempt: number) => Promise<T>,
  opts: { attempts: number; baseDelayMs?: number; signal?: AbortSignal | undefined },
): Promise<T> {
  const base = opts.baseDelayMs ?? 250;
  for (let attempt = 1; ; attempt++) {
    opts.signal?.throwIfAborted();
    try {
      return await fn(attempt);
    } catch (err) {
      if (opts.signal?.aborted || attempt >= opts.attempts || !isTransient(err)) throw err;
      const delay = Math.min(8000, base * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
      await sleep(delay, undefined, opts.signal ? { signal: opts.signal } : {});
    }
  }
}
