import type { HostDisks, HostLayers } from "@sandtree/host";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { storeLayerAgain } from "./checkpoint-chain.js";

/** The name a flattened layer is written under before it replaces its checkpoint's (the host lists one hidden as `.tmp-flat-` under it). */
const FLAT_TMP = "tmp-flat-";

/**
 * Rewrites a deep DURABLE checkpoint's layer as one layer over the image base (see
 * CheckpointService.flattenInBackground). Never throws: a failure leaves the chain as it was.
 */
export async function flattenCheckpoint(
  deps: { store: Store; layers: HostLayers; log: Logger; host: HostDisks },
  id: string,
): Promise<void> {
  const row = await deps.store.getCheckpoint(id);
  if (!row?.blob_key || row.state !== "DURABLE") return;
  // A name in the host's layers directory, swapped in by its layers port.
  const tmp = `${FLAT_TMP}${id}`;
  try {
    const digest = await deps.host.flattenLayer(row.blob_key, await deps.host.linkBase(row.base), tmp);
    // Stored (for a remote store: uploaded) before the new hash is recorded, then swapped where it lies.
    const commit = () => deps.store.updateCheckpoint(id, { sha256: digest.sha256, stored_bytes: digest.size }, ["DURABLE"]);
    if (!(await deps.layers.replace(row.blob_key, tmp, digest, commit))) return;
    deps.log.info({ checkpoint: id, depth: row.depth, bytes: digest.size }, "checkpoint layer flattened");
  } catch (err) {
    await deps.host.removeLayer(tmp).catch(() => {});
    deps.log.warn({ checkpoint: id, err: (err as Error).message }, "flattening failed; the chain stays as it was");
  }
}

/**
 * After a restart: a flattened layer whose hash the database already records finishes its
 * interrupted swap; other ones go, and a remote store gets the recorded layer again (it may hold
 * the flattened bytes whose hash was never recorded).
 */
export async function finishInterruptedFlattens(deps: {
  store: Store;
  layers: HostLayers;
  host: HostDisks;
  log: Logger;
}): Promise<void> {
  for (const f of await deps.host.listLayers(FLAT_TMP)) {
    const flat = /^tmp-flat-(ck-[0-9a-f]+)$/.exec(f);
    const row = flat?.[1] ? await deps.store.getCheckpoint(flat[1]) : undefined;
    if (row?.blob_key && row.sha256 && (await deps.layers.storeAs(row.blob_key, f, row.sha256))) continue;
    await deps.host.removeLayer(f);
    if (row) await storeLayerAgain(deps.layers, row, deps.log).catch(() => {});
  }
}
