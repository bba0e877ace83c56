import { type HostDisks, type HostLayers, isBaseName } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";

/** Whether the host refused a layer as corrupt or missing from the blob store (HostLayers.fetch). */
function corrupt(err: unknown): err is SandtreeError {
  return err instanceof SandtreeError && err.code === "CHECKPOINT_CORRUPT";
}

/** Has the host fetch a checkpoint's layer (or memory file) from the blob store, checked against its recorded sha256. */
async function fetched(
  chain: ChainLayers,
  id: string,
  key: string,
  sha256: string,
  signal?: AbortSignal,
  detail: Record<string, string> = {},
): Promise<string> {
  try {
    await chain.layers.fetch(key, sha256, signal ? { signal } : {});
    return key;
  } catch (err) {
    if (!corrupt(err)) throw err;
    throw new SandtreeError("CHECKPOINT_CORRUPT", `checkpoint ${id} cannot be restored: ${err.message}`, {
      checkpoint_id: id,
      ...detail,
    });
  }
}

/**
 * Whether the image base a checkpoint recorded (its name, ResolvedImage.base) is on the host: linked
 * into its layers directory, its link not dangling. A row from before names (a path) says no.
 */
export async function baseHere(disks: Pick<HostDisks, "hasLayer" | "linkBase">, base: string): Promise<boolean> {
  if (!isBaseName(base)) return false;
  try {
    return await disks.hasLayer(await disks.linkBase(base));
  } catch (err) {
    if (err instanceof SandtreeError && err.code === "IMAGE_NOT_FOUND") return false;
    throw err;
  }
}

/** The host's layers port, and its layers directory asked by name (a chain's files lie there once fetched). */
export interface ChainLayers {
  layers: HostLayers;
  disks: Pick<HostDisks, "hasLayer" | "linkBase">;
}

/**
 * Has the host fetch and verify every layer of a DURABLE checkpoint's chain (sha256 against what
 * was recorded) and, with `memory`, its memory file, into its layers directory; returns the top
 * layer's name there, to back a new sandbox's disk, and the memory state's.
 * A corrupt or missing layer is CHECKPOINT_CORRUPT: such a checkpoint never boots. With
 * `sealingHere`, a FROZEN checkpoint this process is sealing counts too: its layer (and RAM file)
 * are used from this host's layer directory unhashed (they have no hash yet; the host wrote them here,
 * and nothing writes to them again). Only the host that took it can say so: a worker, or a host
 * reading the object store, never passes it.
 */
export async function verifyChain(
  store: Store,
  chain: ChainLayers,
  top: CheckpointRow,
  opts: { memory: boolean; signal?: AbortSignal; sealingHere?: (id: string) => boolean },
): Promise<{ layer: string; row: CheckpointRow; memState: string | null }> {
  const id = top.id;
  const { signal } = opts;
  const here = (c: CheckpointRow) => c.state === "FROZEN" && !c.sha256 && opts.sealingHere?.(c.id) === true;
  const local = async (key: string, what: string) => {
    if (!(await chain.disks.hasLayer(key)))
      throw new SandtreeError("CHECKPOINT_CORRUPT", `${what} of ${id} is missing`, { checkpoint_id: id });
    return key;
  };
  if (top.state !== "DURABLE" && !here(top)) {
    const code = top.state === "FAILED" ? "CHECKPOINT_FAILED" : "CHECKPOINT_NOT_READY";
    throw new SandtreeError(code, `checkpoint ${id} is ${top.state}, not DURABLE`, { checkpoint_id: id, state: top.state });
  }
  let topLayer = "";
  for (let c: CheckpointRow | undefined = top; c; c = c.parent_id ? await store.getCheckpoint(c.parent_id) : undefined) {
    if (here(c) && c.blob_key) {
      const p = await local(c.blob_key, `the frozen layer ${c.id}`);
      if (c === top) topLayer = p;
      continue;
    }
    if (!c.blob_key || !c.sha256)
      throw new SandtreeError("CHECKPOINT_CORRUPT", `layer of ${c.id} was never stored`, { checkpoint_id: id });
    const { blob_key, sha256 } = c;
    const layer = c.id;
    let p: string;
    try {
      p = await fetched(chain, id, blob_key, sha256, signal, { layer });
    } catch (err) {
      // A flattening may have swapped the layer (and its hash) while we read it: once more.
      const now = await store.getCheckpoint(layer);
      if (!corrupt(err) || !now?.sha256 || now.sha256 === sha256) throw err;
      p = await fetched(chain, id, blob_key, now.sha256, signal, { layer });
    }
    if (c === top) topLayer = p;
  }
  let memState: string | null = null;
  if (opts.memory && top.mem_key && here(top)) {
    memState = await local(top.mem_key, "the RAM file");
  } else if (opts.memory) {
    if (!top.mem_key || !top.mem_sha256) {
      throw new SandtreeError("CHECKPOINT_HAS_NO_MEMORY", `checkpoint ${id} has no memory to restore`, { checkpoint_id: id });
    }
    memState = await fetched(chain, id, top.mem_key, top.mem_sha256, signal);
  }
  if (!(await baseHere(chain.disks, top.base))) {
    throw new SandtreeError("CHECKPOINT_CORRUPT", `the image base of checkpoint ${id} is gone`, { checkpoint_id: id });
  }
  return { layer: topLayer, row: top, memState };
}

/**
 * Has the host store a DURABLE checkpoint's layer again when it still has its recorded hash: after
 * a flattening interrupted between its upload and the hash's commit, a remote store holds bytes
 * whose hash was never recorded.
 */
export async function storeLayerAgain(layers: HostLayers, row: CheckpointRow, log: Logger): Promise<void> {
  if (row.state !== "DURABLE" || !row.blob_key || !row.sha256) return;
  if (await layers.storeAs(row.blob_key, row.blob_key, row.sha256))
    log.info({ checkpoint: row.id }, "stored a layer again after an interrupted flattening");
}
