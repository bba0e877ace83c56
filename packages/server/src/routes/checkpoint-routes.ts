import { CreateCheckpointRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import { publicCheckpoint } from "../services/checkpoints/checkpoint-view.js";
import { CHECKPOINT_ID_HEADER } from "../services/fleet/worker-headers.js";
import type { Services } from "../services/services.js";
import { CONTROL_PLANE_KEY_ID } from "../services/teams/auth-service.js";

const SandboxParams = z.object({ id: z.string().min(1).max(64) });
const CheckpointParams = z.object({ cid: z.string().min(1).max(64) });
const CheckpointIdHeader = z.string().regex(/^ck-[0-9a-f]{20}$/, "a checkpoint id (ck- and 20 hex digits)");

/** A fleet worker takes the checkpoint its control plane asked for under the control plane's id. */
function givenId(headers: Record<string, unknown>, keyId: string): { id?: string } {
  const given = headers[CHECKPOINT_ID_HEADER];
  if (given === undefined) return {};
  if (keyId !== CONTROL_PLANE_KEY_ID)
    throw new SandtreeError("FORBIDDEN", `${CHECKPOINT_ID_HEADER} is for a fleet worker's control plane only`);
  return { id: parse(CheckpointIdHeader, given) };
}

export function checkpointRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/checkpoints", async (req, reply) => {
    const { id } = parse(SandboxParams, req.params);
    const body = parse(CreateCheckpointRequest, req.body ?? {});
    const opts = {
      ...(body.ttl_seconds ? { ttlSeconds: body.ttl_seconds } : {}),
      includeMemory: body.include_memory,
      ...givenId(req.headers, req.principal.keyId),
    };
    // Taken where the sandbox runs (on a fleet worker: there; this control plane keeps the record).
    const c = await (await s.checkpointSites.of(req.principal.teamId, id)).take(req.principal.teamId, id, opts);
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
    const c = await s.checkpoints.delete(req.principal.teamId, cid);
    return publicCheckpoint(c);
  });

  // Checkpoint, start a child (or `count` children) from it once FROZEN (RestoreService.fork).
  app.post("/v1/sandboxes/:id/fork", async (req, reply) => {
    const { id } = parse(SandboxParams, req.params);
    const body = req.body;
    if (body !== null && typeof body === "object" && "host" in body && !req.principal.isAdmin) {
      throw new SandtreeError("FORBIDDEN", "host (pinning a fork's children to a fleet host) needs an admin key", {
        field: "host",
      });
    }
    const out = await s.restores.fork(req.principal.teamId, id, req.body);
    return reply.status(201).send("sandbox" in out ? out.sandbox : out);
  });

  // Puts a running sandbox back to a memory checkpoint's state, keeping its id.
  app.post("/v1/sandboxes/:id/reset", async (req) => {
    const { id } = parse(SandboxParams, req.params);
    // Done where the sandbox runs (on a fleet worker: there, its chain sent first).
    return (await s.checkpointSites.of(req.principal.teamId, id)).reset(req.principal.teamId, id, req.body);
  });
}
