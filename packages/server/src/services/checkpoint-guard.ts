import type { SandboxService } from "./sandbox-service.js";

/**
 * `p` with a deadline, for a checkpoint's calls into the guest; rejects at once on a host disk
 * error (the guest cannot answer then).
 */
export function guarded<T>(sandboxes: SandboxService, sandboxId: string, p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onIoError = (id: string, reason: string) => {
      if (id === sandboxId) finish(new Error(reason));
    };
    const timer = setTimeout(() => finish(new Error(`${what} did not answer within ${Math.round(ms / 1000)} s`)), ms);
    timer.unref();
    function finish(err: Error | null, v?: T) {
      clearTimeout(timer);
      sandboxes.ioEvents.off("io-error", onIoError);
      if (err) reject(err);
      else resolve(v as T);
    }
    sandboxes.ioEvents.on("io-error", onIoError);
    const held = sandboxes.ioErrorOf(sandboxId);
    if (held) finish(new Error(held));
    p.then(
      (v) => finish(null, v),
      (e: Error) => finish(e),
    );
  });
}
