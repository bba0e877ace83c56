import { randomBytes } from "node:crypto";
import { CheckpointRecord, ResetRequest, type Sandbox, SandtreeError } from "@sandtree/protocol";
import { parse } from "../../errors.js";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { TakeOptions } from "../checkpoints/checkpoint-site.js";
import type { Logger } from "../observability/logger.js";
import { chainOf, checkpointRecord } from "./checkpoint-records.js";
import type { FleetService } from "./fleet-service.js";
import type { RemoteHost } from "./host-names.js";
import type { RemoteSandboxes } from "./remote-sandboxes.js";

/** How long a worker may take to fetch and check a chain it lacks. */
const PREPARE_MS = 30 * 60_000;

export interface RemoteCheckpointsDeps {
  store: Store;
  fleet: FleetService;
  remote: RemoteSandboxes;
  log: Logger;
  /** How often a checkpoint taken on a worker is looked at until it is DURABLE or FAILED (default 250 ms). */
  followEveryMs?: number;
  /** How long a worker may not answer about a checkpoint before it is FAILED here (default 2 min). */
  silentForMs?: number;
}

/**
 * The control plane's side of checkpoints of sandboxes on workers: the worker takes it under the
 * id given here and stores its layer (in the fleet's object store); this store's row is the
 * record (listed, fetched and deleted here), following the worker's state: FROZEN, then DURABLE
 * once the worker's upload finished, or FAILED with the worker's reason.
 */
export class RemoteCheckpoints {
  private readonly followers = new Map<string, AbortController>();

  constructor(private readonly deps: RemoteCheckpointsDeps) {}

  private get client() {
    return this.deps.remote.client;
  }

  /** Takes a checkpoint of a team's sandbox on the worker `host` that runs it (see FleetCheckpointSites). */
  async createOn(host: RemoteHost, teamId: string, sandboxId: string, opts: TakeOptions): Promise<CheckpointRow> {
    const { store } = this.deps;
    const id = opts.id ?? `ck-${randomBytes(10).toString("hex")}`;
    const body = { include_memory: opts.includeMemory === true, ...(opts.ttlSeconds ? { ttl_seconds: opts.ttlSeconds } : {}) };
    // A memory checkpoint saves the VM's RAM first (up to 2 minutes on the worker).
    await this.client.call(host, "POST", `/v1/sandboxes/${sandboxId}/checkpoints`, {
      body,
      checkpointId: id,
      timeoutMs: 180_000,
    });
    const rec = CheckpointRecord.parse(await this.client.call(host, "GET", `/v1/fleet/checkpoints/${id}`, {}));
    // Base paths are each host's own: a host that restores it resolves the image by its digest.
    await store.insertCheckpoint({ ...rec, team_id: teamId, base: "", updated_at: new Date().toISOString() });
    await store.updateSandbox(sandboxId, { head_checkpoint_id: id });
    await store.addEvent(sandboxId, `checkpoint ${id} taken on host ${host.name}`);
    if (rec.state === "PENDING" || rec.state === "FROZEN") this.follow(host, id);
    return (await store.getCheckpoint(id)) as CheckpointRow;
  }

  /** After a restart: the checkpoints still being taken on workers are followed again. */
  async resume(): Promise<void> {
    for (const c of await this.deps.store.listCheckpoints({ states: ["PENDING", "FROZEN"] })) {
      const host = await this.deps.remote.hostOf(c.sandbox_id).catch(() => null);
      if (host && !this.followers.has(c.id)) this.follow(host, c.id);
    }
  }

  /** Moves this row along with the worker's: DURABLE (with the layer's sha256) or FAILED. */
  private follow(at: RemoteHost, id: string): void {
    const { store, fleet, log } = this.deps;
    const stop = new AbortController();
    this.followers.set(id, stop);
    const every = this.deps.followEveryMs ?? 250;
    const silentFor = this.deps.silentForMs ?? 120_000;
    void (async () => {
      let answeredAt = Date.now();
      while (!stop.signal.aborted) {
        await new Promise((r) => setTimeout(r, every).unref());
        const mine = await store.getCheckpoint(id);
        if (!mine || (mine.state !== "PENDING" && mine.state !== "FROZEN")) return;
        let rec: CheckpointRecord | null = null;
        try {
          const host = (await fleet.remoteHost(at.id)) ?? at;
          rec = CheckpointRecord.parse(await this.client.call(host, "GET", `/v1/fleet/checkpoints/${id}`, {}));
          answeredAt = Date.now();
        } catch (err) {
          if (Date.now() - answeredAt < silentFor) continue;
          const error = `on host ${at.name}: no answer about the checkpoint before it was durable (${(err as Error).message})`;
          await store.updateCheckpoint(id, { state: "FAILED", error }, ["PENDING", "FROZEN"]);
          return;
        }
        if (rec.state === "DURABLE") {
          const { sha256, mem_sha256, stored_bytes, blob_key, mem_key } = rec;
          const patch = { state: "DURABLE" as const, sha256, mem_sha256, stored_bytes, blob_key, mem_key };
          if (await store.updateCheckpoint(id, patch, ["PENDING", "FROZEN"]))
            log.info({ checkpoint: id, host: at.name, bytes: stored_bytes }, "checkpoint durable on a worker");
          return;
        }
        if (rec.state === "FAILED" || rec.state === "DELETING") {
          const error = `on host ${at.name}: ${rec.error ?? rec.state}`;
          await store.updateCheckpoint(id, { state: "FAILED", error }, ["PENDING", "FROZEN"]);
          return;
        }
      }
    })()
      .catch((err: Error) => log.warn({ checkpoint: id, err: err.message }, "following a worker's checkpoint failed"))
      .finally(() => {
        if (this.followers.get(id) === stop) this.followers.delete(id);
      });
  }

  /** Sends a checkpoint's chain to a worker, which records it and pulls and checks its layers. */
  async prepareOn(host: RemoteHost, checkpointId: string, memory: boolean, signal?: AbortSignal): Promise<void> {
    const top = await this.deps.store.getCheckpoint(checkpointId);
    if (!top) throw new SandtreeError("CHECKPOINT_NOT_FOUND", `checkpoint ${checkpointId} not found`, { id: checkpointId });
    const checkpoints = (await chainOf(this.deps.store, top)).map(checkpointRecord);
    await this.client.call(host, "POST", "/v1/fleet/checkpoints/prepare", {
      body: { checkpoints, memory },
      // The worker may download the whole chain (and a memory file) first.
      timeoutMs: PREPARE_MS,
      ...(signal ? { signal } : {}),
    });
  }

  /** A deleted checkpoint: every worker drops its copy (and its row); one that does not answer keeps it. */
  async forget(id: string): Promise<void> {
    this.followers.get(id)?.abort();
    const hosts = await Promise.all([...(await this.deps.fleet.workerUrls()).keys()].map((h) => this.deps.fleet.remoteHost(h)));
    await Promise.all(
      hosts.map(async (host) => {
        if (!host) return;
        await this.client.call(host, "DELETE", `/v1/checkpoints/${id}`, {}).catch(() => {});
      }),
    );
  }

  /**
   * Reset of a team's sandbox on the worker `host` that runs it: the checkpoint's chain goes there
   * first (as for a restore), then the worker resets it in place.
   */
  async resetOn(host: RemoteHost, teamId: string, id: string, raw: unknown): Promise<Sandbox> {
    const { store } = this.deps;
    const body = parse(ResetRequest, raw ?? {});
    const ck = await store.getCheckpoint(body.checkpoint_id, teamId);
    if (!ck)
      throw new SandtreeError("CHECKPOINT_NOT_FOUND", `checkpoint ${body.checkpoint_id} not found`, { id: body.checkpoint_id });
    if (!ck.mem_key) throw new SandtreeError("CHECKPOINT_HAS_NO_MEMORY", `checkpoint ${ck.id} has no memory`);
    const holders = await this.deps.remote.holders(ck);
    if (holders && !holders.has(host.id)) {
      throw new SandtreeError("CHECKPOINT_NOT_ON_HOST", `checkpoint ${ck.id} is not on host ${host.name}, where ${id} runs`, {
        checkpoint_id: ck.id,
        host: host.name,
      });
    }
    await this.prepareOn(host, ck.id, true);
    await this.deps.remote.follow(id, await this.client.call(host, "POST", `/v1/sandboxes/${id}/reset`, { body }));
    await store.updateSandbox(id, { head_checkpoint_id: ck.id });
    return (await store.getSandbox(id, teamId)) as Sandbox;
  }

  close(): void {
    for (const f of this.followers.values()) f.abort();
  }
}
