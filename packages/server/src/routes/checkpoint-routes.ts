import { CreateCheckpointRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import { publicCheckpoint } from "../services/checkpoint-view.js";
import type { Services } from "../services/services.js";

const SandboxParams = z.object({ id: z.string().min(1).max(64) });
const CheckpointParams = z.object({ cid: z.string().min(1).max(64) });

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
    return { checkpoints: (await s.checkpoints.list(req.principal.teamId, id)).map(publicCheckpoint) };
  });

  app.get("/v1/checkpoints", async (req) => ({
    checkpoints: (await s.checkpoints.list(req.principal.teamId)).map(publicCheckpoint),
  }));

  app.get("/v1/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return publicCheckpoint(await s.checkpoints.get(req.principal.teamId, cid));
  });

  app.delete("/v1/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return publicCheckpoint(await s.checkpoints.delete(req.principal.teamId, cid));
  });

  // Checkpoint, wait until DURABLE, start a child (or `count` children) from it.
  app.post("/v1/sandboxes/:id/fork", async (req, reply) => {
    const { id } = parse(SandboxParams, req.params);
    const out = await s.restores.fork(req.principal.teamId, id, req.body);
    return reply.status(201).send("sandbox" in out ? out.sandbox : out);
  });

  // Puts a running sandbox back to a memory checkpoint's state, keeping its id.
  app.post("/v1/sandboxes/:id/reset", async (req) => {
    const { id } = parse(SandboxParams, req.params);
    return s.restores.reset(req.principal.teamId, id, req.body);
  });
}
