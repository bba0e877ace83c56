import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });

export function pauseRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/pause", async (req) => {
    const { id } = parse(Params, req.params);
    return s.sandboxes.pause(req.principal.teamId, id);
  });

  app.post("/v1/sandboxes/:id/resume", async (req) => {
    const { id } = parse(Params, req.params);
    return s.sandboxes.resume(req.principal.teamId, id);
  });
}
