import { UpdateNetworkRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });

export function networkRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/sandboxes/:id/network", async (req) => {
    const { id } = parse(Params, req.params);
    await s.sandboxes.get(req.principal.teamId, id);
    return (s.sandboxes.networkOf(id) ?? s.network).view(id);
  });

  // Replaces the egress policy of a running sandbox (a list, or neither for the server default).
  app.put("/v1/sandboxes/:id/network", async (req) => {
    const { id } = parse(Params, req.params);
    const body = parse(UpdateNetworkRequest, req.body ?? {});
    await s.sandboxes.running(req.principal.teamId, id);
    return (s.sandboxes.networkOf(id) ?? s.network).update(id, body);
  });
}
