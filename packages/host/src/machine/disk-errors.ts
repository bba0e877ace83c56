import type { QmpClient } from "../vmm/qmp-client.js";

/**
 * QEMU pauses a VM whose disk write fails with ENOSPC (werror=enospc, its default and ours: the
 * guest never sees an error and loses nothing). This watcher reports it (`onError` with the
 * reason) and continues the VM every two seconds, which retries the failed write: once the host
 * has space again it runs on by itself (`onCleared`). A VM adopted after a restart may already be
 * paused on a disk error (its event is gone): its run state is checked once at the start.
 */
export interface DiskErrorOptions {
  qmp: QmpClient;
  /** The machine ended (or was replaced): events are ignored and retries stop. */
  ended: () => boolean;
  onError: (reason: string) => void;
  onCleared: () => void;
}

/** Starts watching; returns its stop function. */
export function watchDiskErrors(o: DiskErrorOptions): () => void {
  const { qmp } = o;
  let retry: NodeJS.Timeout | null = null;
  let held = false;
  const stopRetry = () => {
    if (retry) clearInterval(retry);
    retry = null;
  };
  const cleared = () => {
    stopRetry();
    if (!held) return;
    held = false;
    o.onCleared();
  };
  const onEvent = (ev: { event?: string; data?: Record<string, unknown> }) => {
    if (o.ended()) return;
    if (ev.event === "BLOCK_IO_ERROR" && ev.data?.action === "stop") {
      if (!held) {
        held = true;
        const reason = `QEMU paused the VM on a disk ${String(ev.data.operation ?? "I/O")} error: ${String(ev.data.reason ?? "unknown")}${ev.data.nospace ? " (the host's data disk is full)" : ""}`;
        o.onError(reason);
      }
      retry ??= setInterval(() => {
        if (o.ended()) return stopRetry();
        qmp
          .execute<{ status?: string }>("query-status", undefined, { timeoutMs: 2000 })
          .then((st) => {
            if (st.status === "io-error") return qmp.execute("cont", undefined, { timeoutMs: 2000 });
            if (st.status === "running") cleared();
            return undefined;
          })
          .catch(() => {});
      }, 2000);
      retry.unref();
    } else if (ev.event === "RESUME" && held) cleared();
  };
  qmp.on("event", onEvent);
  qmp
    .execute<{ status?: string }>("query-status", undefined, { timeoutMs: 5000 })
    .then((st) => {
      if (st.status === "io-error" && !held) {
        onEvent({ event: "BLOCK_IO_ERROR", data: { action: "stop", operation: "I/O", reason: "found paused on it" } });
      }
    })
    .catch(() => {});
  return () => {
    stopRetry();
    qmp.off("event", onEvent);
    held = false;
  };
}
