import { HeartbeatRequest, HostName, PlacementRequest, RegisterHostRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const HostParams = z.object({ name: HostName });
const HostIdParams = z.object({ id: z.string().min(1).max(64) });

/** Worker routes authenticate themselves (join token, host secret): no API key. */
export const WORKER_ROUTE_PREFIX = "/v1/fleet/hosts/";

/**
 * Fleet mode: workers register with the join token and heartbeat with their host secret
 * (never an API key); admins list, cordon, drain and uncordon hosts, and place reservations.
 */
export function fleetRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/fleet/hosts/register", async (req, reply) => {
    const body = parse(RegisterHostRequest, req.body);
    return reply.status(201).send(await s.fleet.register(req.headers.authorization, body));
  });

  app.post("/v1/fleet/hosts/:id/heartbeat", async (req) => {
    const { id } = parse(HostIdParams, req.params);
    return s.fleet.heartbeat(id, req.headers.authorization, parse(HeartbeatRequest, req.body ?? {}));
  });

  app.get("/v1/hosts", async (req) => ({ hosts: await s.fleet.list(req.principal) }));

  app.post("/v1/hosts/:name/cordon", async (req) => {
    const { name } = parse(HostParams, req.params);
    return s.fleet.setCordon(req.principal, name, true);
  });

  // Drain is cordon today: no new work, its sandboxes stay until they end (moving a running
  // sandbox to another host is not built); the answer counts those still there.
  app.post("/v1/hosts/:name/drain", async (req) => {
    const { name } = parse(HostParams, req.params);
    return s.fleet.setCordon(req.principal, name, true);
  });

  app.post("/v1/hosts/:name/uncordon", async (req) => {
    const { name } = parse(HostParams, req.params);
    return s.fleet.setCordon(req.principal, name, false);
  });

  app.post("/v1/fleet/placements", async (req, reply) => {
    const body = parse(PlacementRequest, req.body);
    return reply.status(201).send(await s.fleet.place(req.principal, body));
  });

  app.delete("/v1/fleet/placements/:id", async (req) => {
    const { id } = parse(HostIdParams, req.params);
    return { released: await s.fleet.releaseAsAdmin(req.principal, id) };
  });
}
