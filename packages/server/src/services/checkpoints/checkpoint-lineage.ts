import type { HostLayers } from "@sandtree/host";
import type { CheckpointState } from "@sandtree/protocol";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";

export const LIVE: readonly CheckpointState[] = ["PENDING", "FROZEN", "DURABLE"];

/**
 * The checkpoints whose layers something needs, with their ancestors: live checkpoints (those of
 * `exceptSandbox` left out), the heads of active sandboxes, and `held` (forks and restores in flight).
 */
export async function neededCheckpoints(
  store: Store,
  held: Iterable<string>,
  opts: { all?: CheckpointRow[]; exceptSandbox?: string } = {},
): Promise<Set<string>> {
  const all = opts.all ?? (await store.listCheckpoints({}));
  const byId = new Map(all.map((c) => [c.id, c]));
  const needed = new Set<string>();
  const markChain = (id: string | null) => {
    for (let c = id ? byId.get(id) : undefined; c && !needed.has(c.id); c = c.parent_id ? byId.get(c.parent_id) : undefined) {
      needed.add(c.id);
    }
  };
  for (const c of all) if (LIVE.includes(c.state) && c.sandbox_id !== opts.exceptSandbox) markChain(c.id);
  for (const id of await store.checkpointsInUse()) markChain(id);
  for (const id of held) markChain(id);
  return needed;
}

/**
 * A checkpoint is DURABLE only once its whole chain is stored. Children start from a FROZEN
 * checkpoint (its layer complete on this host), so a child's checkpoint may have an ancestor
 * still being sealed here (`sealing` gives its seal: waited for) or whose seal failed while the
 * child kept its layer: that layer, written by this host, is sealed and stored now, its hash
 * recorded (its state stays FAILED: it cannot itself be restored). Stops at the first DURABLE one.
 */
export async function sealAncestors(
  deps: { store: Store; log: Logger; layers: HostLayers },
  row: CheckpointRow,
  sealing: (id: string) => Promise<void> | undefined,
  signal: AbortSignal,
): Promise<void> {
  for (let id = row.parent_id; id; ) {
    const seal = sealing(id);
    if (seal) await seal;
    signal.throwIfAborted();
    const c = await deps.store.getCheckpoint(id);
    if (!c) throw new Error(`its ancestor ${id} is gone`);
    if (c.state === "DURABLE") return;
    if (!c.sha256) {
      if (!c.blob_key) throw new Error(`the layer of its ancestor ${id} is gone (${c.state}${c.error ? `: ${c.error}` : ""})`);
      const sealed = await deps.layers.store(c.blob_key, { signal });
      await deps.store.updateCheckpoint(id, { sha256: sealed.sha256 });
      deps.log.info({ checkpoint: row.id, ancestor: id }, "stored the layer of an ancestor whose own seal failed");
    }
    id = c.parent_id;
  }
}
