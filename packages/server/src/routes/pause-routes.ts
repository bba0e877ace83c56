import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });

// A sandbox on a fleet worker is paused or resumed there and this control plane's record follows
// (SandboxService, through the sandbox's site); the answer is that record, as for any sandbox.
export function pauseRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/pause", async (req) => {
    const { id } = parse(Params, req.params);
    const teamId = req.principal.teamId;
    return s.sandboxes.pause(teamId, id);
  });

  app.post("/v1/sandboxes/:id/resume", async (req) => {
    const { id } = parse(Params, req.params);
    const teamId = req.principal.teamId;
    return s.sandboxes.resume(teamId, id);
  });
}
