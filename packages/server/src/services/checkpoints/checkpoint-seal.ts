import type { HostLayers } from "@sandtree/host";

/**
 * Has the host that holds a frozen checkpoint's files seal them (fsync + sha256) and put them in
 * the blob store: its disk layer and, for a memory checkpoint, its memory state. Resolves once both
 * are stored (for a remote store: in the bucket), which is when the checkpoint may become DURABLE.
 */
export async function sealFiles(
  layers: HostLayers,
  key: string,
  memKey: string | null,
  signal: AbortSignal,
): Promise<{ sha256: string; size: number; memBytes: number; mem_sha256: string | null }> {
  const { sha256, size } = await layers.store(key, { signal });
  signal.throwIfAborted();
  if (!memKey) return { sha256, size, memBytes: 0, mem_sha256: null };
  const m = await layers.store(memKey, { signal });
  return { sha256, size, memBytes: m.size, mem_sha256: m.sha256 };
}

/**
 * Runs `write` now and, while it throws (a full disk refusing the database write), every 2 s
 * until it succeeds. The retry timers are kept in `timers` so that close() can stop them.
 */
export async function retryUntilWritten(write: () => Promise<unknown>, timers: Set<NodeJS.Timeout>): Promise<void> {
  const attempt = () =>
    write().then(
      () => true,
      () => false,
    );
  if (await attempt()) return;
  let writing = false;
  const retry = setInterval(() => {
    if (writing) return;
    writing = true;
    void attempt().then((ok) => {
      writing = false;
      if (!ok || !timers.has(retry)) return;
      clearInterval(retry);
      timers.delete(retry);
    });
  }, 2000);
  retry.unref();
  timers.add(retry);
}
