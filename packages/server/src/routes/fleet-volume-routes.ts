import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Services } from "../services/services.js";
import { CONTROL_PLANE_KEY_ID } from "../services/teams/auth-service.js";
import type { WorkerVolumes } from "../services/volumes/worker-volumes.js";

/** These routes answer a worker's control plane only (its call key), on a worker only. */
function workerSide(req: FastifyRequest, s: Services): WorkerVolumes {
  if (req.principal.keyId !== CONTROL_PLANE_KEY_ID || !s.workerVolumes)
    throw new SandtreeError("FORBIDDEN", `${req.method} ${req.routeOptions.url} is for a fleet worker's control plane only`);
  return s.workerVolumes;
}

/** A volume's move between fleet hosts, the worker's steps (see VolumeMoves and WorkerVolumes). */
export function fleetVolumeRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/fleet/volumes/pack", async (req) => workerSide(req, s).pack(req.body));
  app.post("/v1/fleet/volumes/unpack", async (req) => workerSide(req, s).unpack(req.body));
  app.post("/v1/fleet/volumes/drop", async (req) => workerSide(req, s).drop(req.body));
}
