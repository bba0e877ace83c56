import type { HostDisks, HostLayers } from "@sandtree/host";
import {
  type CheckpointRecord,
  PrepareCheckpointRequest,
  type PrepareCheckpointResponse,
  SandtreeError,
} from "@sandtree/protocol";
import { parse } from "../../errors.js";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { verifyChain } from "../checkpoints/checkpoint-chain.js";
import type { ImageResolver } from "../images/image-resolver.js";
import { checkpointRecord, ensureBase } from "./checkpoint-records.js";

export interface WorkerCheckpointsDeps {
  /** Links the image bases layers lie on; says which layers its layers directory holds. */
  disks: HostDisks;
  /** The worker's host fetching a chain's layers from the object store into its layers directory. */
  layers: HostLayers;
  store: Store;
  images: ImageResolver;
  /** The worker's own team: every sandbox and checkpoint the control plane runs here is its. */
  teamId: string;
}

/**
 * A worker's side of checkpoints in the fleet: what it tells its control plane of a checkpoint it
 * took (the record, with the layer's key and sha256), what it reports holding (locality), and the
 * import of a chain it never saw, taken on another host, before a restore, fork or reset here.
 */
export class WorkerCheckpoints {
  constructor(private readonly deps: WorkerCheckpointsDeps) {}

  /** The record of a checkpoint of this worker (`GET /v1/fleet/checkpoints/:cid`). */
  async record(id: string): Promise<CheckpointRecord> {
    const row = await this.deps.store.getCheckpoint(id, this.deps.teamId);
    if (!row) throw new SandtreeError("CHECKPOINT_NOT_FOUND", `checkpoint ${id} not found`, { id });
    return checkpointRecord(row);
  }

  /** The layers this worker holds (its DURABLE checkpoints' layers in its cache), reported as locality. */
  async layers(): Promise<string[]> {
    const rows = await this.deps.store.listCheckpoints({ teamId: this.deps.teamId, states: ["DURABLE"] });
    const keys = rows.flatMap((r) => (r.blob_key ? [r.blob_key] : []));
    const held = await Promise.all(keys.map((k) => this.deps.disks.hasLayer(k)));
    return keys.filter((_, i) => held[i]);
  }

  /**
   * Records the chain's checkpoints this worker has not seen (with its own image base), then
   * fetches what its cache lacks from the object store and checks every sha256: a mismatch or an
   * absent object is CHECKPOINT_CORRUPT, before any sandbox is started from it.
   */
  async prepare(raw: unknown, signal?: AbortSignal): Promise<PrepareCheckpointResponse> {
    const req = parse(PrepareCheckpointRequest, raw);
    const { store, teamId } = this.deps;
    const top = req.checkpoints[0] as CheckpointRecord;
    if (top.state !== "DURABLE")
      throw new SandtreeError("CHECKPOINT_NOT_READY", `checkpoint ${top.id} is ${top.state}, not DURABLE`, {
        checkpoint_id: top.id,
      });
    for (let i = 0; i < req.checkpoints.length; i++) {
      const r = req.checkpoints[i] as CheckpointRecord;
      const below = req.checkpoints[i + 1];
      // An ancestor may be deleted (DELETING): its layer stays while this chain needs it.
      if (!r.blob_key || !r.sha256)
        throw new SandtreeError("CHECKPOINT_CORRUPT", `layer of ${r.id} was never stored`, { checkpoint_id: top.id });
      if (below !== undefined && below.id !== r.parent_id)
        throw new SandtreeError("VALIDATION_FAILED", `checkpoints: ${r.id}'s parent is ${r.parent_id}, not ${below.id}`, {
          field: "checkpoints",
        });
    }
    // Parents first: a row names its parent.
    for (const r of [...req.checkpoints].reverse()) {
      const have = await store.getCheckpoint(r.id);
      if (have && have.team_id !== teamId)
        throw new SandtreeError("CONFLICT", `checkpoint ${r.id} belongs to another team here`, { checkpoint_id: r.id });
      if (have?.sha256 === r.sha256 && have.blob_key === r.blob_key && (have.state === "DURABLE" || r.state !== "DURABLE"))
        continue;
      if (have) {
        // Known here but not as the fleet records it (failed or deleted here): the record wins.
        await store.updateCheckpoint(r.id, { state: r.state, sha256: r.sha256, blob_key: r.blob_key, error: null });
        continue;
      }
      try {
        await store.insertCheckpoint({ ...r, team_id: teamId, base: "", updated_at: new Date().toISOString() });
      } catch (err) {
        // Another restore of the same chain recorded it first.
        if (!(await store.getCheckpoint(r.id))) throw err;
      }
    }
    const topRow = (await store.getCheckpoint(top.id)) as CheckpointRow;
    await ensureBase(store, this.deps.images, this.deps.disks, topRow, signal);
    const fresh = (await store.getCheckpoint(top.id)) as CheckpointRow;
    await verifyChain(store, { layers: this.deps.layers, disks: this.deps.disks }, fresh, {
      memory: req.memory,
      ...(signal ? { signal } : {}),
    });
    return { checkpoint_id: top.id, layers: req.checkpoints.length };
  }
}
