import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { WorkerCheckpoints } from "../services/fleet/worker-checkpoints.js";
import type { Services } from "../services/services.js";
import { CONTROL_PLANE_KEY_ID } from "../services/teams/auth-service.js";

const CheckpointParams = z.object({ cid: z.string().min(1).max(64) });

/** These routes answer a worker's control plane only (its call key), on a worker only. */
function workerSide(req: FastifyRequest, s: Services): WorkerCheckpoints {
  if (req.principal.keyId !== CONTROL_PLANE_KEY_ID || !s.workerCheckpoints)
    throw new SandtreeError("FORBIDDEN", `${req.method} ${req.routeOptions.url} is for a fleet worker's control plane only`);
  return s.workerCheckpoints;
}

/** A worker's checkpoint records, and the import of a chain taken elsewhere (see WorkerCheckpoints). */
export function fleetCheckpointRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/fleet/checkpoints/:cid", async (req) => {
    const { cid } = parse(CheckpointParams, req.params);
    return workerSide(req, s).record(cid);
  });

  app.post("/v1/fleet/checkpoints/prepare", async (req) => {
    return workerSide(req, s).prepare(req.body);
  });
}
