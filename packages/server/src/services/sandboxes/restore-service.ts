import {
  type Accel,
  CreateSandboxRequest,
  ForkRequest,
  type Sandbox,
  SandtreeError,
  type VolumeMount,
  VolumeMounts,
  VolumeSourceMode,
} from "@sandtree/protocol";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Store } from "../../store/store.js";
import type { CheckpointService } from "../checkpoints/checkpoint-service.js";
import type { CheckpointSites } from "../checkpoints/checkpoint-site.js";
import { chainOf, ensureBase } from "../fleet/checkpoint-records.js";
import type { RestorePlan } from "../fleet/restore-plan.js";
import type { ImageResolver } from "../images/image-resolver.js";
import type { NetworkService } from "../network/network-service.js";
import type { VolumeService } from "../volumes/volume-service.js";
import type { AdmissionService } from "./admission-service.js";
import { inheritedNesting, nestedOfMachine, refuseOtherMachine, refuseUnavailableNesting } from "./machine-identity.js";
import type { RestoreLayers } from "./provisioner.js";
import type { HostBundle } from "./sandbox-parts.js";
import type { SandboxService } from "./sandbox-service.js";

const GiB = 1024 ** 3;

export interface RestoreServiceDeps {
  sandboxes: SandboxService;
  checkpoints: CheckpointService;
  admission: AdmissionService;
  network: NetworkService;
  store: Store;
  images: ImageResolver;
  /** A sandbox's volume mounts, which its forks and restores mount too. */
  volumes?: Pick<VolumeService, "mountsAsRequest" | "snapshotMounts" | "discard">;
  /** This server's accelerator (what nested virtualization and memory states are checked against). */
  accel: Accel;
  /** Where a sandbox's checkpoints are taken (the bundle of the host it runs on). */
  checkpointSites: CheckpointSites;
}

/** How long a restore placed on another host waits for a FROZEN checkpoint to be stored (a fork says). */
const WAIT_DURABLE_MS = 300_000;

/**
 * Everything that starts from a checkpoint: a create with `checkpoint_id`, a fork (checkpoint,
 * start children) and an episode reset. The checkpoint's chain is verified once per call here,
 * and its resolved layers are handed to provisioning. On the host that took it, a checkpoint is
 * usable once FROZEN (its layer and RAM file are complete; the seal carries on in the background);
 * another host reads it from the object store, so a start placed there waits until it is DURABLE.
 */
export class RestoreService {
  constructor(private readonly deps: RestoreServiceDeps) {}

  /**
   * A restore of the checkpoint, to be placed: its layers are checked on the host chosen (here,
   * after the image base of a checkpoint taken on a worker is found here; or on that worker).
   */
  private async plan(teamId: string, checkpointId: string, memory: boolean, waitMs = WAIT_DURABLE_MS): Promise<RestorePlan> {
    const { store, sandboxes, checkpoints } = this.deps;
    const row = await checkpoints.get(teamId, checkpointId);
    const frozenHere = row.state === "FROZEN" && checkpoints.sealingHere(row.id);
    if (row.state !== "DURABLE" && !frozenHere) {
      const code = row.state === "FAILED" ? "CHECKPOINT_FAILED" : "CHECKPOINT_NOT_READY";
      throw new SandtreeError(code, `checkpoint ${row.id} is ${row.state}, not DURABLE`, {
        checkpoint_id: row.id,
        state: row.state,
      });
    }
    if (memory && !row.mem_key)
      throw new SandtreeError("CHECKPOINT_HAS_NO_MEMORY", `checkpoint ${row.id} has no memory to restore`, {
        checkpoint_id: row.id,
      });
    const layers = (await chainOf(store, row)).flatMap((c) => (c.blob_key ? [c.blob_key] : []));
    return {
      kind: "plan",
      checkpoint: row,
      layers,
      memory,
      localHolds: (await Promise.all(layers.map((k) => sandboxes.bundles.local.host.hasLayer(k)))).every(Boolean),
      on: async (bundle) => {
        // A FROZEN layer lies on the host that took it: another host reads the chain from the store.
        if (frozenHere && bundle !== sandboxes.bundles.local) await checkpoints.waitDurable(teamId, row.id, waitMs);
        await ensureBase(store, bundle.images, bundle.host, row);
        return (await this.layers(teamId, checkpointId, memory, bundle)).layers;
      },
    };
  }

  private async layers(teamId: string, checkpointId: string, memory: boolean, on: HostBundle) {
    const { row, layer, memState } = await this.deps.checkpoints.restorePath(teamId, checkpointId, undefined, { memory, on });
    const layers: RestoreLayers = { layerName: layer, digest: row.image_digest, memState };
    return { row, layers };
  }

  /**
   * A create: with `checkpoint_id`, image and disk size come from the checkpoint, and CPUs,
   * memory and lifetime default to its source sandbox's; a corrupt checkpoint fails the call
   * with CHECKPOINT_CORRUPT.
   */
  async create(teamId: string, raw: unknown): Promise<{ sandbox: Sandbox; created: boolean }> {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw) || !("checkpoint_id" in raw)) {
      const params = parse(CreateSandboxRequest, raw);
      refuseUnavailableNesting(this.deps.sandboxes.bundles.local.host.capabilities, params);
      // No `checkpoint_id` key in the request: a create from an image.
      return this.deps.sandboxes.createFromImage(teamId, { ...params, checkpoint_id: undefined });
    }
    const r = raw as Record<string, unknown>;
    for (const field of ["image", "disk_size_gb"]) {
      if (field in r) {
        throw new SandtreeError("VALIDATION_FAILED", `${field}: omit it when restoring: it comes from the checkpoint`, { field });
      }
    }
    const { checkpoint_id, restore_memory } = parse(
      z.object({ checkpoint_id: z.string().min(1).max(64), restore_memory: z.boolean().optional() }),
      r,
    );
    const release = this.deps.checkpoints.hold(checkpoint_id);
    try {
      return await this.restore(teamId, r, checkpoint_id, restore_memory === true);
    } finally {
      release();
    }
  }

  private async restore(
    teamId: string,
    r: Record<string, unknown>,
    checkpoint_id: string,
    restore_memory: boolean,
  ): Promise<{ sandbox: Sandbox; created: boolean }> {
    const plan = await this.plan(teamId, checkpoint_id, restore_memory);
    const row = plan.checkpoint;
    const shape: Record<string, unknown> = {};
    if (restore_memory && row.cpu_cores !== null && row.memory_mb !== null) {
      // A running VM's memory fits only the same machine: CPUs and memory come from the checkpoint.
      const memory_gb = row.memory_mb / 1024;
      for (const [field, want] of [
        ["cpu_cores", row.cpu_cores],
        ["memory_gb", memory_gb],
      ] as const) {
        if (field in r && r[field] !== want) {
          throw new SandtreeError("VALIDATION_FAILED", `${field}: a memory restore keeps the checkpoint's ${field} (${want})`, {
            field,
          });
        }
      }
      Object.assign(shape, { cpu_cores: row.cpu_cores, memory_gb });
      // ... and the CPU model: nested virtualization as it was saved.
      const nested = nestedOfMachine(row.machine);
      if (nested !== null) {
        if ("nested_virtualization" in r && r.nested_virtualization !== nested) {
          throw new SandtreeError(
            "VALIDATION_FAILED",
            `nested_virtualization: a memory restore keeps the checkpoint's (${nested})`,
            {
              field: "nested_virtualization",
            },
          );
        }
        shape.nested_virtualization = nested;
      }
      refuseOtherMachine(row, { accel: this.deps.accel, nested: nested ?? false }, "this server");
      // The guest's NFS mounts are in its memory: the same volumes, or its mounts would hang.
      if ("volumes" in r && r.volumes !== "shared") {
        throw new SandtreeError("VALIDATION_FAILED", "volumes: a memory restore mounts its source sandbox's volumes (shared)", {
          field: "volumes",
        });
      }
    } else {
      // As a fork: CPUs, memory and lifetime not given are the source sandbox's (kept after it ended).
      const src = await this.sourceSandbox(teamId, row.sandbox_id);
      if (src) {
        if (!("cpu_cores" in r)) shape.cpu_cores = src.cpu_cores;
        if (!("memory_gb" in r)) shape.memory_gb = src.memory_gb;
        if (!("timeout_minutes" in r)) shape.timeout_minutes = src.timeout_minutes ?? -1;
        if (!("nested_virtualization" in r)) shape.nested_virtualization = inheritedNesting(src);
      }
    }
    const mode = "volumes" in r ? r.volumes : "shared";
    if (typeof mode === "string") {
      const { volumes } = parse(z.object({ volumes: VolumeSourceMode }), { volumes: mode });
      shape.volumes = await this.sourceMounts(teamId, row.sandbox_id, volumes);
    }
    const params = parse(CreateSandboxRequest, {
      ...r,
      ...shape,
      image: row.image,
      disk_size_gb: Math.round(row.disk_size_bytes / GiB),
    });
    refuseUnavailableNesting(this.deps.sandboxes.bundles.local.host.capabilities, params);
    return this.withSnapshots(mode === "snapshot" ? shape.volumes : [], () =>
      this.deps.sandboxes.createFromCheckpoint(teamId, { params: { ...params, checkpoint_id }, plan }),
    );
  }

  /** The source sandbox's volumes, shared or (snapshot) copies of them made now. */
  private async sourceMounts(teamId: string, sandboxId: string, mode: VolumeSourceMode): Promise<VolumeMount[]> {
    const v = this.deps.volumes;
    if (!v) return [];
    return mode === "snapshot" ? v.snapshotMounts(teamId, sandboxId) : v.mountsAsRequest(sandboxId);
  }

  /** Runs a create that mounts `snapshots` (made for it): deleted again when it fails or replays another sandbox. */
  private async withSnapshots(
    snapshots: unknown,
    create: () => Promise<{ sandbox: Sandbox; created: boolean }>,
  ): Promise<{ sandbox: Sandbox; created: boolean }> {
    const ids = Array.isArray(snapshots) ? (snapshots as VolumeMount[]).map((m) => m.volume) : [];
    try {
      const out = await create();
      if (!out.created) await this.deps.volumes?.discard(ids);
      return out;
    } catch (err) {
      await this.deps.volumes?.discard(ids);
      throw err;
    }
  }

  private async sourceSandbox(teamId: string, id: string): Promise<Sandbox | undefined> {
    try {
      return await this.deps.sandboxes.get(teamId, id);
    } catch {
      return undefined;
    }
  }

  /**
   * Checkpoint, start children from it; they inherit CPU, memory, timeout, environment, secrets,
   * labels and network policy unless overridden. Children here start from the FROZEN checkpoint
   * and keep its layers while they run, whatever becomes of its seal; a checkpoint taken on a
   * worker, or children placed on another host, wait until it is DURABLE.
   */
  async fork(
    teamId: string,
    id: string,
    raw: unknown,
  ): Promise<{ sandbox: Sandbox } | { sandboxes: Sandbox[]; checkpoint_id: string }> {
    const body = parse(ForkRequest, raw ?? {});
    const { sandboxes, checkpoints } = this.deps;
    const src = await sandboxes.get(teamId, id);
    if (body.memory && (body.cpu_cores !== undefined || body.memory_gb !== undefined)) {
      throw new SandtreeError("VALIDATION_FAILED", "a memory fork keeps the parent's cpu_cores and memory_gb", {
        field: body.cpu_cores !== undefined ? "cpu_cores" : "memory_gb",
      });
    }
    if (body.memory && body.volumes === "snapshot") {
      // The guest's NFS mounts are in its memory, with file handles of the parent's volumes.
      throw new SandtreeError("VALIDATION_FAILED", "volumes: a memory fork mounts its parent's volumes (shared)", {
        field: "volumes",
      });
    }
    // Checkpointed where the sandbox runs (a worker: there); its children are placed like any restore.
    const site = await this.deps.checkpointSites.of(teamId, id);
    const ck = await site.take(teamId, id, { includeMemory: body.memory });
    const waitMs = body.wait_timeout_seconds * 1000;
    await site.readyForChildren(teamId, ck.id, waitMs);
    const release = checkpoints.hold(ck.id);
    try {
      return await this.startChildren(teamId, src, body, ck.id, waitMs);
    } finally {
      release();
    }
  }

  private async startChildren(
    teamId: string,
    src: Sandbox,
    body: z.infer<typeof ForkRequest>,
    checkpointId: string,
    waitMs: number,
  ): Promise<{ sandbox: Sandbox } | { sandboxes: Sandbox[]; checkpoint_id: string }> {
    const { sandboxes } = this.deps;
    const plan = await this.plan(teamId, checkpointId, body.memory, waitMs);
    const secrets = await this.deps.admission.secretsOf(src.id);
    const shared = body.volumes === "shared" ? await this.sourceMounts(teamId, src.id, "shared") : [];
    const parsed = parse(CreateSandboxRequest, {
      image: src.image,
      checkpoint_id: checkpointId,
      restore_memory: body.memory,
      disk_size_gb: src.disk_size_gb,
      cpu_cores: body.cpu_cores ?? src.cpu_cores,
      memory_gb: body.memory_gb ?? src.memory_gb,
      nested_virtualization: inheritedNesting(src),
      timeout_minutes: body.timeout_minutes ?? src.timeout_minutes ?? -1,
      environment_vars: src.environment_vars,
      labels: src.labels,
      ...(await (this.deps.sandboxes.networkOf(src.id) ?? this.deps.network).inheritedParams(src.id)),
      ...(Object.keys(secrets).length > 0 ? { secrets } : {}),
      ...(shared.length > 0 ? { volumes: shared } : {}),
      ...(body.name ? { name: body.name } : {}),
      ...(body.host ? { host: body.host } : {}),
    });
    const base = { ...parsed, checkpoint_id: checkpointId };
    // Each child gets snapshots of its own (volumes: "snapshot"): siblings never see each other's writes.
    const child = async () => {
      if (body.volumes === "shared") return (await sandboxes.createFromCheckpoint(teamId, { params: base, plan })).sandbox;
      const snaps = await this.sourceMounts(teamId, src.id, "snapshot");
      const params = snaps.length > 0 ? { ...base, volumes: parse(VolumeMounts, snaps) } : base;
      return (await this.withSnapshots(snaps, () => sandboxes.createFromCheckpoint(teamId, { params, plan }))).sandbox;
    };
    if (body.count === undefined) return { sandbox: await child() };
    const children: Sandbox[] = [];
    for (let i = 0; i < body.count; i++) children.push(await child());
    return { sandboxes: children, checkpoint_id: checkpointId };
  }
}
