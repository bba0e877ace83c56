import { randomBytes } from "node:crypto";
import { type BlobStore, CheckpointFailedError, type HostDisks, type HostLayers, type SavedCheckpoint } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { machineOf } from "../sandboxes/machine-identity.js";
import { liveDiskName, memoryMbFor } from "../sandboxes/sandbox-paths.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { countHolder } from "../support/count-holder.js";
import { verifyChain } from "./checkpoint-chain.js";
import { finishInterruptedFlattens, flattenCheckpoint } from "./checkpoint-flatten.js";
import { LIVE, neededCheckpoints, sealAncestors } from "./checkpoint-lineage.js";
import { retryUntilWritten, sealFiles } from "./checkpoint-seal.js";

export interface CheckpointServiceDeps {
  /**
   * The local host: it fetches a restore's layers and flattens chains (the host owns the disk
   * format and holds the files). A checkpoint's layers are stored by its sandbox's host.
   */
  host: HostDisks;
  store: Store;
  sandboxes: SandboxService;
  blobs: BlobStore;
  log: Logger;
  /** How long the guest may take to freeze its filesystem (SANDTREE_FREEZE_DEADLINE_MS, 30 s). */
  deadlines?: { freezeMs?: number };
  /** Chains at least this deep get their top layer flattened in the background (default 16). */
  flattenDepth?: number;
}

function newId(): string {
  return `ck-${randomBytes(10).toString("hex")}`;
}

/**
 * Filesystem checkpoints as layers: the host freezes the guest filesystem and turns the active disk
 * read-only with a new disk on top (FROZEN, milliseconds), then store the frozen layer with its
 * sha256 (DURABLE). A checkpoint is its image base plus the chain of its ancestors' layers; a
 * layer names its parent relative to the store's directory, so stored layers do not depend on
 * where the sandbox lived. Layers are kept while any live checkpoint or running sandbox needs them.
 */
export class CheckpointService {
  private readonly sandboxLocks = new Map<string, Promise<unknown>>();
  private readonly uploads = new Map<string, { sandboxId: string; abort: AbortController; done: Promise<void> }>();
  private readonly durableWaiters = new Map<string, Array<() => void>>();
  /** Checkpoints a fork or restore in flight starts from (kept by the collector until its rows exist). */
  private readonly holds = new Map<string, number>();
  private reaper: NodeJS.Timeout | null = null;
  private readonly flattens = new Map<string, Promise<void>>();
  private readonly failRetries = new Set<NodeJS.Timeout>();
  /** Chains at least this deep get their top layer flattened in the background. */
  private readonly flattenDepth: number;

  private readonly freezeDeadlineMs: number;
  /** The local host's layers port over the blob store: it fetches what a restore needs. */
  private readonly layers: HostLayers;

  constructor(private readonly deps: CheckpointServiceDeps) {
    this.layers = deps.host.layers(deps.blobs);
    this.freezeDeadlineMs = deps.deadlines?.freezeMs ?? 30_000;
    this.flattenDepth = deps.flattenDepth ?? 16;
    // A sandbox going away fails its checkpoints that are not durable yet.
    deps.sandboxes.onTeardown((id) => this.onSandboxTeardown(id));
  }

  async get(teamId: string, id: string): Promise<CheckpointRow> {
    const c = await this.deps.store.getCheckpoint(id, teamId);
    if (!c) throw new SandtreeError("CHECKPOINT_NOT_FOUND", `checkpoint ${id} not found`, { id });
    return c;
  }

  async list(teamId: string, sandboxId?: string): Promise<CheckpointRow[]> {
    if (sandboxId !== undefined) await this.deps.sandboxes.get(teamId, sandboxId);
    return await this.deps.store.listCheckpoints({ teamId, ...(sandboxId !== undefined ? { sandboxId } : {}) });
  }

  /** Runs `fn` after every earlier freeze of the same sandbox finished (freezes never overlap). */
  private serialized<T>(sandboxId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.sandboxLocks.get(sandboxId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => {});
    this.sandboxLocks.set(sandboxId, tail);
    tail.then(() => {
      if (this.sandboxLocks.get(sandboxId) === tail) this.sandboxLocks.delete(sandboxId);
    });
    return next;
  }

  async create(
    teamId: string,
    sandboxId: string,
    opts: { ttlSeconds?: number; includeMemory?: boolean; id?: string } = {},
  ): Promise<CheckpointRow> {
    const { store } = this.deps;
    await this.deps.sandboxes.running(teamId, sandboxId);
    return this.serialized(sandboxId, async () => {
      const vm = await this.deps.sandboxes.running(teamId, sandboxId);
      const sb = await this.deps.sandboxes.get(teamId, sandboxId);
      const parent = sb.head_checkpoint_id ? await store.getCheckpoint(sb.head_checkpoint_id) : undefined;
      const frozenDisk = vm.activeDisk;
      if (!frozenDisk) throw new SandtreeError("CONFLICT", "this sandbox has no disk to checkpoint");
      const now = new Date().toISOString();
      const row: CheckpointRow = {
        id: opts.id ?? newId(),
        sandbox_id: sandboxId,
        parent_id: parent?.id ?? null,
        team_id: teamId,
        state: "PENDING",
        depth: (parent?.depth ?? 0) + 1,
        image: sb.image,
        image_digest: sb.image_digest,
        base: parent?.base ?? (await this.deps.sandboxes.baseOf(sb)),
        disk_size_bytes: sb.disk_size_gb * 1024 ** 3,
        stored_bytes: 0,
        sha256: null,
        blob_key: null,
        error: null,
        created_at: now,
        updated_at: now,
        expires_at: opts.ttlSeconds ? new Date(Date.now() + opts.ttlSeconds * 1000).toISOString() : null,
        mem_key: null,
        mem_sha256: null,
        cpu_cores: opts.includeMemory ? sb.cpu_cores : null,
        memory_mb: opts.includeMemory ? memoryMbFor(sb.memory_gb) : null,
        machine: opts.includeMemory ? machineOf(sb.accel, sb.nested_virtualization) : null,
      };
      await store.insertCheckpoint(row);
      // The host takes it (freeze or stop, cut the disk, save memory, thaw or run on) and rolls
      // back on failure; the guest writes to `next` from now on.
      const next = liveDiskName(sandboxId, row.id);
      const memFile = opts.includeMemory ? `mem-${row.id}` : undefined;
      let saved: SavedCheckpoint;
      try {
        saved = await vm.checkpoint({
          nextDisk: next,
          diskSizeBytes: row.disk_size_bytes,
          freezeDeadlineMs: this.freezeDeadlineMs,
          ...(memFile ? { memoryFile: memFile } : {}),
        });
      } catch (err) {
        const message = (err as Error).message;
        const ioError = this.deps.sandboxes.ioErrorOf(sandboxId);
        if (err instanceof CheckpointFailedError && err.machineLost) {
          await this.deps.sandboxes.failVm(sandboxId, vm, err.machineLost);
        }
        const diskFull = ioError !== undefined || /ENOSPC|No space left/i.test(message);
        const reason = ioError
          ? `the host's data disk is full: ${ioError}; the sandbox runs on once space is freed`
          : diskFull
            ? `the host's data disk is full: ${message}`
            : `could not snapshot the sandbox disk: ${message}`;
        await this.markFailed(row.id, reason);
        throw new SandtreeError(diskFull ? "HOST_DISK_FULL" : "CHECKPOINT_FAILED", reason, { checkpoint_id: row.id });
      }
      if (saved.memoryState) {
        row.mem_key = saved.memoryState;
        await store.updateCheckpoint(row.id, { mem_key: row.mem_key });
        // Its copy-on-write RAM image builds now, beside the seal: a fork's children find it built.
        this.deps.sandboxes.prepareMemoryImage(sb, saved.memoryState);
      }
      // The frozen overlay is the checkpoint's layer, in place: it holds what changed since the parent.
      await store.updateCheckpoint(row.id, { state: "FROZEN", blob_key: saved.layer }, ["PENDING"]);
      await store.updateSandbox(sandboxId, { head_checkpoint_id: row.id });
      this.startUpload(row, saved.layer);
      return (await this.deps.store.getCheckpoint(row.id)) as CheckpointRow;
    });
  }

  /** FAILED with the reason; a full disk may refuse the write, so it is retried until it lands. */
  private async markFailed(id: string, reason: string): Promise<void> {
    await retryUntilWritten(
      () => this.deps.store.updateCheckpoint(id, { state: "FAILED", error: reason }, ["PENDING"]),
      this.failRetries,
    );
  }

  /** Makes the frozen layer durable: fsync, sha256, into the blob store (in place for a local one). */
  private startUpload(row: CheckpointRow, key: string): void {
    const { id } = row;
    const abort = new AbortController();
    const done = (async () => {
      try {
        // The host the sandbox runs on holds what it froze: it stores it.
        const layers = this.deps.sandboxes.bundles.of(row.sandbox_id).host.layers(this.deps.blobs);
        const { sha256, size, memBytes, mem_sha256 } = await sealFiles(layers, key, row.mem_key, abort.signal);
        await sealAncestors({ ...this.deps, layers }, row, (a) => this.uploads.get(a)?.done, abort.signal);
        if (
          await this.deps.store.updateCheckpoint(id, { state: "DURABLE", sha256, mem_sha256, stored_bytes: size + memBytes }, [
            "FROZEN",
          ])
        ) {
          this.deps.log.info({ checkpoint: id, bytes: size }, "checkpoint durable");
          if (row.depth >= this.flattenDepth) this.flattenInBackground(id);
        } else {
          // Deleted while sealing: the collector decides whether the layer can go.
          await this.deps.store.updateCheckpoint(id, { sha256 });
          queueMicrotask(() => this.collect().catch(() => {}));
        }
      } catch (err) {
        const reason = abort.signal.aborted
          ? String((abort.signal.reason as Error | undefined)?.message ?? "aborted")
          : `storing the layer failed: ${(err as Error).message}`;
        await this.deps.store.updateCheckpoint(id, { state: "FAILED", error: reason }, ["PENDING", "FROZEN"]);
      } finally {
        this.uploads.delete(id);
        for (const w of this.durableWaiters.get(id) ?? []) w();
        this.durableWaiters.delete(id);
      }
    })();
    this.uploads.set(id, { sandboxId: row.sandbox_id, abort, done });
  }

  /**
   * Rewrites a deep checkpoint's layer as one layer over the image base, so restores of it (and
   * of its descendants, whose headers name it) stop reading through a long chain. The guest-visible
   * bytes are identical. Running VMs keep the old inode open; new opens get the flat file. The
   * new hash is recorded before the rename, and reconcile() finishes or drops a swap a crash
   * interrupted, by comparing the temp file's hash with the database.
   */
  private flattenInBackground(id: string): void {
    const p = flattenCheckpoint({ ...this.deps, layers: this.layers }, id).finally(() => this.flattens.delete(id));
    this.flattens.set(id, p);
  }

  /** Resolves when background flattening (if any) of these checkpoints is done. */
  async flattened(ids: string[]): Promise<void> {
    await Promise.all(ids.map((id) => this.flattens.get(id)));
  }

  /** Whether this process is sealing the checkpoint: FROZEN, its layer (and RAM file) complete on this host. */
  sealingHere(id: string): boolean {
    return this.uploads.has(id);
  }

  /** Keeps the checkpoint's layers from the collector until the returned release is called. */
  hold(id: string): () => void {
    return countHolder(this.holds, id);
  }

  /** Waits until the checkpoint is DURABLE; throws CHECKPOINT_FAILED, or TIMEOUT (not a failure). */
  async waitDurable(teamId: string, id: string, timeoutMs: number): Promise<CheckpointRow> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const c = await this.get(teamId, id);
      if (c.state === "DURABLE") return c;
      if (c.state === "FAILED" || c.state === "DELETING") {
        throw new SandtreeError("CHECKPOINT_FAILED", `checkpoint ${id} is ${c.state}${c.error ? `: ${c.error}` : ""}`, {
          checkpoint_id: id,
        });
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new SandtreeError("TIMEOUT", `checkpoint ${id} is still ${c.state}`, { checkpoint_id: id });
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 1000));
        const list = this.durableWaiters.get(id) ?? [];
        list.push(() => {
          clearTimeout(t);
          resolve();
        });
        this.durableWaiters.set(id, list);
      });
    }
  }

  /**
   * Verifies every layer of the checkpoint's chain (sha256 against what was recorded) and returns
   * the top layer's name, to back a new sandbox's disk. A corrupt or missing layer is
   * CHECKPOINT_CORRUPT: such a checkpoint never boots. Layers this process is still sealing are
   * used as they are on this host (no hash yet: the host wrote them here and writes no more to them).
   */
  async restorePath(
    teamId: string | undefined,
    id: string,
    signal?: AbortSignal,
    opts: { memory?: boolean } = {},
  ): Promise<{ layer: string; row: CheckpointRow; memState: string | null }> {
    const top = teamId === undefined ? await this.deps.store.getCheckpoint(id) : await this.get(teamId, id);
    if (!top) throw new SandtreeError("CHECKPOINT_NOT_FOUND", `checkpoint ${id} not found`, { id });
    const verify = (row: CheckpointRow) =>
      verifyChain(this.deps.store, { layers: this.layers, disks: this.deps.host }, row, {
        ...(signal ? { signal } : {}),
        memory: opts.memory === true,
        sealingHere: (c) => this.uploads.has(c),
      });
    if (top.state === "DURABLE") return verify(top);
    try {
      return await verify(top);
    } catch (err) {
      // Its seal (or an ancestor's) may have ended in between: once more with what the rows say now.
      const now = await this.deps.store.getCheckpoint(id);
      if (!now || now.state === top.state) throw err;
      return verify(now);
    }
  }

  /** Deleting stops the checkpoint's bill at once; its layer stays while descendants need it. */
  async delete(teamId: string, id: string): Promise<CheckpointRow> {
    const c = await this.get(teamId, id);
    // Conditional: a concurrent delete of the same checkpoint records the change once.
    if (await this.deps.store.updateCheckpoint(id, { state: "DELETING", stored_bytes: 0 }, [...LIVE, "FAILED"])) {
      this.uploads.get(id)?.abort.abort(new Error("checkpoint deleted before it was durable"));
    }
    await this.collect();
    return (await this.deps.store.getCheckpoint(id)) ?? { ...c, state: "DELETING", stored_bytes: 0 };
  }

  /**
   * Removes every layer that nothing needs: a layer is needed by its own live checkpoint, by the
   * live checkpoints descending from it, and by active sandboxes restored from it or a descendant.
   */
  async collect(): Promise<void> {
    const { store } = this.deps;
    const all = await store.listCheckpoints({});
    const needed = await neededCheckpoints(store, this.holds.keys(), { all });
    for (const c of all) {
      if (needed.has(c.id) || this.uploads.has(c.id)) continue;
      if (c.blob_key || c.mem_key) {
        if (c.blob_key) await this.deps.blobs.delete(c.blob_key);
        if (c.mem_key) await this.deps.blobs.delete(c.mem_key);
        await store.updateCheckpoint(c.id, { blob_key: null, mem_key: null, stored_bytes: 0 });
      }
      // FAILED rows stay visible with their error; deleted ones go.
      if (c.state === "DELETING") await store.deleteCheckpointRow(c.id);
    }
  }

  /**
   * A sandbox is going away: its checkpoints not yet durable fail with a clear reason, except
   * those another sandbox started from (a fork's children): their layers stay anyway, so their
   * seals carry on.
   */
  async onSandboxTeardown(sandboxId: string): Promise<void> {
    const mine = [...this.uploads.entries()].filter(([, u]) => u.sandboxId === sandboxId);
    const needed =
      mine.length > 0 ? await neededCheckpoints(this.deps.store, this.holds.keys(), { exceptSandbox: sandboxId }) : new Set();
    const pending = mine.filter(([id]) => !needed.has(id)).map(([, u]) => u);
    for (const u of pending) u.abort.abort(new Error("the source sandbox ended before the checkpoint was durable"));
    await Promise.allSettled(pending.map((u) => u.done));
    await this.sandboxLocks.get(sandboxId);
    await this.collect().catch(() => {});
  }

  /**
   * After a restart: a PENDING checkpoint may or may not have been snapshotted, so it FAILs. A
   * FROZEN one's layer is complete (the machine writes to the disk above it since the snapshot), so its
   * sealing (fsync + sha256) starts again and it becomes DURABLE; without its file it FAILs,
   * when `mine` says its sandbox is this server's (on a shared store another may be taking it).
   */
  async reconcile(mine: (sandboxId: string) => Promise<boolean> = async () => true): Promise<void> {
    const lost = "the server restarted before the checkpoint was durable";
    for (const c of await this.deps.store.listCheckpoints({ states: ["PENDING", "FROZEN"] })) {
      if (c.state === "FROZEN" && c.blob_key && (await this.deps.host.hasLayer(c.blob_key))) {
        this.deps.log.info({ checkpoint: c.id }, "sealing a checkpoint the restart interrupted");
        this.startUpload(c, c.blob_key);
        continue;
      }
      if (!(await mine(c.sandbox_id))) continue;
      await this.deps.store.updateCheckpoint(c.id, { state: "FAILED", error: lost }, ["PENDING", "FROZEN"]);
    }
    await finishInterruptedFlattens({ ...this.deps, layers: this.layers });
    await this.collect();
  }

  /** Deletes checkpoints whose ttl ran out. */
  startReaper(intervalMs = 5000): void {
    const reap = async () => {
      const now = new Date().toISOString();
      for (const c of await this.deps.store.listCheckpoints({ states: LIVE })) {
        if (c.expires_at && c.expires_at <= now) this.delete(c.team_id, c.id).catch(() => {});
      }
    };
    this.reaper = setInterval(() => {
      reap().catch((err: Error) => this.deps.log.warn({ err: err.message }, "checkpoint reaper failed"));
    }, intervalMs);
    this.reaper.unref();
  }

  async close(): Promise<void> {
    if (this.reaper) clearInterval(this.reaper);
    for (const r of this.failRetries) clearInterval(r);
    for (const u of this.uploads.values()) u.abort.abort(new Error("the server shut down before the checkpoint was durable"));
    await Promise.allSettled([...this.uploads.values()].map((u) => u.done));
    await Promise.allSettled([...this.flattens.values()]);
  }
}
