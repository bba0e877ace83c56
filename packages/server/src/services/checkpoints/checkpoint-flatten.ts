import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { type BlobStore, type HostDisks, renameKeepingGrants, sha256File } from "@sandtree/host";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { storeLayerAgain } from "./checkpoint-chain.js";

/** The name a flattened layer is written under before it replaces its checkpoint's (`.tmp-flat-` before names were checked). */
const FLAT_TMP = "tmp-flat-";

/**
 * Rewrites a deep DURABLE checkpoint's layer as one layer over the image base (see
 * CheckpointService.flattenInBackground). Never throws: a failure leaves the chain as it was.
 */
export async function flattenCheckpoint(
  deps: { store: Store; blobs: BlobStore; log: Logger; host: HostDisks },
  id: string,
): Promise<void> {
  const row = await deps.store.getCheckpoint(id);
  if (!row?.blob_key || row.state !== "DURABLE") return;
  const dir = deps.blobs.localDir;
  // A name in the host's layers directory (a flat name: not hidden), swapped in by the store.
  const tmp = `${FLAT_TMP}${id}`;
  try {
    const { sha256, size } = await deps.host.flattenLayer(row.blob_key, await deps.host.linkBase(row.base_path), tmp);
    // Stored (for a remote store: uploaded) before the new hash is recorded, then swapped locally.
    const commit = () => deps.store.updateCheckpoint(id, { sha256, stored_bytes: size }, ["DURABLE"]);
    if (!(await deps.blobs.replace(row.blob_key, path.join(dir, tmp), { sha256, size }, commit))) return;
    deps.log.info({ checkpoint: id, depth: row.depth, bytes: size }, "checkpoint layer flattened");
  } catch (err) {
    rmSync(path.join(dir, tmp), { force: true });
    deps.log.warn({ checkpoint: id, err: (err as Error).message }, "flattening failed; the chain stays as it was");
  }
}

/**
 * After a restart: a flattened layer whose hash the database already records finishes its
 * interrupted swap; other temp files go, and a remote store gets the recorded layer again (it
 * may hold the flattened bytes whose hash was never recorded).
 */
export async function finishInterruptedFlattens(deps: { store: Store; blobs: BlobStore; log: Logger }): Promise<void> {
  const dir = deps.blobs.localDir;
  for (const f of readdirSync(dir)) {
    const flat = /^(?:\.tmp-flat-|tmp-flat-)(ck-[0-9a-f]+)$/.exec(f);
    const row = flat?.[1] ? await deps.store.getCheckpoint(flat[1]) : undefined;
    if (row?.blob_key && row.sha256 && (await sha256File(path.join(dir, f))) === row.sha256) {
      await renameKeepingGrants(path.join(dir, f), path.join(dir, row.blob_key));
    } else if (f.startsWith(".tmp-") || f.startsWith(FLAT_TMP)) {
      rmSync(path.join(dir, f), { force: true });
      if (row) await storeLayerAgain(deps.blobs, row, deps.log).catch(() => {});
    }
  }
}
