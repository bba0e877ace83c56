import { PrimeCheckpointIds, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../../errors.js";
import { publicCheckpoint } from "../../services/checkpoints/checkpoint-view.js";
import type { Services } from "../../services/services.js";
import { getEach } from "./prime-batch-get.js";
import { IdParams } from "./prime-sandbox-routes.js";
import { checkpointView } from "./prime-views.js";

const CheckpointParams = z.object({ cid: z.string().min(1).max(64) });

/** Prime's checkpoint calls (0.5: checkpoint, get, list, delete, batch get, wait) on sandtree's checkpoints. */
export function primeCheckpointRoutes(app: FastifyInstance, s: Services): void {
  app.post("/api/v1/sandbox/:id/checkpoints", async (req, reply) => {
    const { id } = parse(IdParams, req.params);
    const opts = { includeMemory: false };
    const c = await (await s.checkpointSites.of(req.principal.teamId, id)).take(req.principal.teamId, id, opts);
    return reply.status(201).send(checkpointView(publicCheckpoint(c)));
  });

  // Oldest first, as Prime lists them; `checkpoint_id` keeps only that one.
  app.get("/api/v1/sandbox/:id/checkpoints", async (req) => {
    const { id } = parse(IdParams, req.params);
    const { checkpoint_id } = parse(z.strictObject({ checkpoint_id: z.string().min(1).max(64).optional() }), req.query);
    await s.sandboxes.get(req.principal.teamId, id);
    const rows = (await s.checkpoints.list(req.principal.teamId, id))
      .filter((c) => checkpoint_id === undefined || c.id === checkpoint_id)
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
    return { checkpoints: rows.map((c) => checkpointView(publicCheckpoint(c))) };
  });

  // Each one as a single delete would: a pending one, or the tip of a running sandbox, is a CONFLICT.
  app.delete("/api/v1/sandbox/:id/checkpoints", async (req) => {
    const { id } = parse(IdParams, req.params);
    await s.sandboxes.get(req.principal.teamId, id);
    const deleted: string[] = [];
    const errors: Array<{ checkpoint_id: string; code: string; message: string }> = [];
    for (const c of await s.checkpoints.list(req.principal.teamId, id)) {
      try {
        await s.checkpoints.delete(req.principal.teamId, c.id);
        deleted.push(c.id);
      } catch (err) {
        if (!(err instanceof SandtreeError) || (err.status !== 404 && err.status !== 409)) throw err;
        errors.push({ checkpoint_id: c.id, code: err.status === 404 ? "NOT_FOUND" : "CONFLICT", message: err.message });
      }
    }
    return { deleted, errors };
  });

  app.post("/api/v1/sandbox/checkpoints::batchGet", async (req) => {
    const { checkpoint_ids } = parse(PrimeCheckpointIds, req.body);
    const { found, missing } = await getEach(checkpoint_ids, async (cid) =>
      checkpointView(publicCheckpoint(await s.checkpoints.get(req.principal.teamId, cid))),
    );
    return {
      checkpoints: found,
      errors: missing.map(({ id, err }) => ({ checkpoint_id: id, code: "NOT_FOUND", message: err.message })),
    };
  });

  app.get("/api/v1/sandbox/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return checkpointView(publicCheckpoint(await s.checkpoints.get(req.principal.teamId, cid)));
  });

  app.delete("/api/v1/sandbox/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    const c = await s.checkpoints.delete(req.principal.teamId, cid);
    return checkpointView(publicCheckpoint(c));
  });
}
