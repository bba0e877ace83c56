import path from "node:path";
import { CreateCheckpointRequest, CreateSandboxRequest, ForkRequest, ResetRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import { publicCheckpoint } from "../services/checkpoint-service.js";
import type { Services } from "../services/services.js";

const GiB = 1024 ** 3;
const SandboxParams = z.object({ id: z.string().min(1).max(64) });
const CheckpointParams = z.object({ cid: z.string().min(1).max(64) });

/**
 * The body of a create: with `checkpoint_id`, image and disk size come from the checkpoint, and
 * CPUs, memory and lifetime default to its source sandbox's; the checkpoint's layers are verified here so a corrupt one fails the call with CHECKPOINT_CORRUPT.
 */
export async function createParams(s: Services, teamId: string, raw: unknown) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw) || !("checkpoint_id" in raw)) {
    return parse(CreateSandboxRequest, raw);
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
  const { row } = await s.checkpoints.restorePath(teamId, checkpoint_id, undefined, { memory: restore_memory === true });
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
  } else {
    // As a fork: CPUs, memory and lifetime not given are the source sandbox's (kept after it ended).
    const src = sourceSandbox(s, teamId, row.sandbox_id);
    if (src) {
      if (!("cpu_cores" in r)) shape.cpu_cores = src.cpu_cores;
      if (!("memory_gb" in r)) shape.memory_gb = src.memory_gb;
      if (!("timeout_minutes" in r)) shape.timeout_minutes = src.timeout_minutes ?? -1;
    }
  }
  return parse(CreateSandboxRequest, { ...r, ...shape, image: row.image, disk_size_gb: Math.round(row.disk_size_bytes / GiB) });
}

function sourceSandbox(s: Services, teamId: string, id: string) {
  try {
    return s.sandboxes.get(teamId, id);
  } catch {
    return undefined;
  }
}

export function checkpointRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/checkpoints", async (req, reply) => {
    const { id } = parse(SandboxParams, req.params);
    const body = parse(CreateCheckpointRequest, req.body ?? {});
    const c = await s.checkpoints.create(req.principal.teamId, id, {
      ...(body.ttl_seconds ? { ttlSeconds: body.ttl_seconds } : {}),
      includeMemory: body.include_memory,
    });
    return reply.status(201).send(publicCheckpoint(c));
  });

  app.get("/v1/sandboxes/:id/checkpoints", async (req) => {
    const { id } = parse(SandboxParams, req.params);
    return { checkpoints: s.checkpoints.list(req.principal.teamId, id).map(publicCheckpoint) };
  });

  app.get("/v1/checkpoints", async (req) => ({
    checkpoints: s.checkpoints.list(req.principal.teamId).map(publicCheckpoint),
  }));

  app.get("/v1/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return publicCheckpoint(s.checkpoints.get(req.principal.teamId, cid));
  });

  app.delete("/v1/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return publicCheckpoint(await s.checkpoints.delete(req.principal.teamId, cid));
  });

  // Checkpoint, wait until DURABLE, start a child from it; the child inherits CPU, memory,
  // timeout, environment, secrets and labels unless overridden.
  app.post("/v1/sandboxes/:id/fork", async (req, reply) => {
    const { id } = parse(SandboxParams, req.params);
    const body = parse(ForkRequest, req.body ?? {});
    const team = req.principal.teamId;
    const src = s.sandboxes.get(team, id);
    if (body.memory && (body.cpu_cores !== undefined || body.memory_gb !== undefined)) {
      throw new SandtreeError("VALIDATION_FAILED", "a memory fork keeps the parent's cpu_cores and memory_gb", {
        field: body.cpu_cores !== undefined ? "cpu_cores" : "memory_gb",
      });
    }
    const ck = await s.checkpoints.create(team, id, { includeMemory: body.memory });
    await s.checkpoints.waitDurable(team, ck.id, body.wait_timeout_seconds * 1000);
    const secrets = s.admission.secretsOf(src.id);
    const params = parse(CreateSandboxRequest, {
      image: src.image,
      checkpoint_id: ck.id,
      restore_memory: body.memory,
      disk_size_gb: src.disk_size_gb,
      cpu_cores: body.cpu_cores ?? src.cpu_cores,
      memory_gb: body.memory_gb ?? src.memory_gb,
      timeout_minutes: body.timeout_minutes ?? src.timeout_minutes ?? -1,
      environment_vars: src.environment_vars,
      labels: src.labels,
      ...s.network.inheritedParams(src.id),
      ...(Object.keys(secrets).length > 0 ? { secrets } : {}),
      ...(body.name ? { name: body.name } : {}),
    });
    if (body.count === undefined) {
      const { sandbox } = await s.sandboxes.createOrReplay(team, params);
      return reply.status(201).send(sandbox);
    }
    const sandboxes = [];
    for (let i = 0; i < body.count; i++) sandboxes.push((await s.sandboxes.createOrReplay(team, params)).sandbox);
    return reply.status(201).send({ sandboxes, checkpoint_id: ck.id });
  });

  // Puts a running sandbox back to a memory checkpoint's state, keeping its id.
  app.post("/v1/sandboxes/:id/reset", async (req) => {
    const { id } = parse(SandboxParams, req.params);
    const body = parse(ResetRequest, req.body ?? {});
    const team = req.principal.teamId;
    const { row, path: layer, memPath } = await s.checkpoints.restorePath(team, body.checkpoint_id, undefined, { memory: true });
    if (!memPath) throw new SandtreeError("CHECKPOINT_HAS_NO_MEMORY", `checkpoint ${row.id} has no memory`);
    return s.sandboxes.reset(team, id, {
      checkpointId: row.id,
      layerName: path.basename(layer),
      memPath,
      memoryMb: row.memory_mb,
      cpuCores: row.cpu_cores,
    });
  });
}
