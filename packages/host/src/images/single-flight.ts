import { abortError } from "../util/run-command.js";

interface Flight<T> {
  promise: Promise<T>;
  controller: AbortController;
  waiters: number;
}

/**
 * Runs one operation per key at a time; concurrent callers share its result. A caller's signal
 * only detaches that caller; the shared work is cancelled when every waiter has gone.
 */
export class SingleFlight<T> {
  private readonly flights = new Map<string, Flight<T>>();

  get size(): number {
    return this.flights.size;
  }

  run(key: string, work: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    let flight = this.flights.get(key);
    if (!flight) {
      const controller = new AbortController();
      const created: Flight<T> = { controller, waiters: 0, promise: Promise.resolve() as Promise<never> };
      created.promise = (async () => work(controller.signal))().finally(() => {
        if (this.flights.get(key) === created) this.flights.delete(key);
      });
      created.promise.catch(() => undefined);
      this.flights.set(key, created);
      flight = created;
    }
    const shared = flight;
    shared.waiters += 1;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const onAbort = (): void => {
        if (done || !signal) return;
        done = true;
        shared.waiters -= 1;
        if (shared.waiters === 0) shared.controller.abort(abortError(signal));
        reject(abortError(signal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      shared.promise.then(
        (value) => {
          signal?.removeEventListener("abort", onAbort);
          if (!done) {
            done = true;
            resolve(value);
          }
        },
        (error: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          if (!done) {
            done = true;
            reject(error);
          }
        },
      );
    });
  }
}
