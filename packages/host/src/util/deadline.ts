import net from "node:net";

/**
 * A deadline for calls into a VM (QMP, the guest agent): an AbortSignal that aborts after `ms`,
 * or when `parent` aborts.
 *
 * Why not `AbortSignal.any([AbortSignal.timeout(ms), parent])`: on Node 20 (seen on 20.20.2) the
 * composite signal holds its sources only weakly, and a timeout signal's timer holds its signal
 * weakly too, with a FinalizationRegistry that *clears the timer* once the signal is collected.
 * Nothing else references the inner timeout signal, so the first garbage collection after it was
 * made (a scavenge is enough) silently removes the deadline: the composite never aborts and the
 * await it guarded waits forever (nodejs/node#57736). Whether it held depended on whether V8 ran a
 * GC inside the window, i.e. on how much the process allocated meanwhile. Here the timer closes
 * over its controller, so the deadline fires for as long as the timer is pending.
 */
export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    super(`${what} did not answer within ${ms} ms`);
  }
}

/**
 * Time that does not count against a deadline: `notCountedMs()` answers how much of the time since
 * the deadline began the guarded work could not run (a VM waiting for a host CPU); the deadline
 * moves out by that much, never past `capMs` from its start.
 */
export interface DeadlineAllowance {
  notCountedMs: () => number;
  capMs: number;
}

export class Deadline {
  private readonly ctl = new AbortController();
  private timer: NodeJS.Timeout;
  private readonly onParentAbort: () => void;
  private expiredPromise: Promise<never> | null = null;
  private readonly startedAt = Date.now();

  constructor(
    readonly ms: number,
    readonly what: string,
    private readonly parent?: AbortSignal,
    private readonly allowance?: DeadlineAllowance,
  ) {
    this.timer = setTimeout(() => this.due(), ms);
    this.onParentAbort = () => this.ctl.abort(parent?.reason ?? new Error("aborted"));
    if (parent?.aborted) this.onParentAbort();
    else parent?.addEventListener("abort", this.onParentAbort, { once: true });
  }

  /** At the deadline: aborts, or waits on for the time that did not count (up to the cap). */
  private due(): void {
    const elapsed = Date.now() - this.startedAt;
    let notCounted = 0;
    try {
      notCounted = this.allowance?.notCountedMs() ?? 0;
    } catch {}
    const until = Math.min(this.ms + Math.max(0, notCounted), this.allowance?.capMs ?? this.ms);
    // Less than a second more: not worth another turn.
    if (until - elapsed >= 1000) {
      this.timer = setTimeout(() => this.due(), until - elapsed);
      return;
    }
    this.ctl.abort(new DeadlineError(this.what, this.ms));
  }

  /** How long it ran before it ended or now (ms). */
  get elapsedMs(): number {
    return Date.now() - this.startedAt;
  }

  get signal(): AbortSignal {
    return this.ctl.signal;
  }

  /** True when the deadline itself ran out (not the parent). */
  get timedOut(): boolean {
    return this.ctl.signal.aborted && this.ctl.signal.reason instanceof DeadlineError;
  }

  /** Milliseconds left (at least 1 while pending, 0 once aborted). */
  get remainingMs(): number {
    if (this.ctl.signal.aborted) return 0;
    return Math.max(1, this.ms - (Date.now() - this.startedAt));
  }

  /** Rejects with the abort reason once the deadline (or the parent) aborts. */
  get expired(): Promise<never> {
    this.expiredPromise ??= new Promise<never>((_, reject) => {
      const s = this.ctl.signal;
      if (s.aborted) reject(s.reason);
      else s.addEventListener("abort", () => reject(s.reason), { once: true });
    });
    // Raced by callers; never an unhandled rejection on its own.
    this.expiredPromise.catch(() => {});
    return this.expiredPromise;
  }

  /** `p`, or the abort reason if the deadline comes first. */
  race<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.expired]);
  }

  /** Stops the timer (call when the guarded work is over). */
  clear(): void {
    clearTimeout(this.timer);
    this.parent?.removeEventListener("abort", this.onParentAbort);
  }
}

/**
 * One connection attempt to a Unix socket: the socket, or null when it is refused (not served
 * yet); rejects with the abort reason when `signal` aborts first (the half-made socket is destroyed).
 */
export function connectUnix(socketPath: string, signal: AbortSignal): Promise<net.Socket | null> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const s = net.connect(socketPath);
    const onAbort = () => {
      s.destroy();
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    s.once("connect", () => {
      signal.removeEventListener("abort", onAbort);
      resolve(s);
    });
    s.once("error", () => {
      signal.removeEventListener("abort", onAbort);
      s.destroy();
      resolve(null);
    });
  });
}
