import { CreateApiKeyRequest, CreateTeamRequest, TeamName, UpdateTeamLimitsRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const TeamParams = z.object({ name: TeamName });
const KeyParams = z.object({ id: z.string().min(1).max(64) });

export function teamRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/teams", async (req, reply) => {
    const body = parse(CreateTeamRequest, req.body);
    return reply.status(201).send(await s.teams.createTeam(req.principal, body.name));
  });

  app.get("/v1/teams", async (req) => ({ teams: await s.teams.listTeams(req.principal) }));

  app.get("/v1/teams/:name/limits", async (req) => {
    const { name } = parse(TeamParams, req.params);
    return s.teams.getLimits(req.principal, name);
  });

  app.put("/v1/teams/:name/limits", async (req) => {
    const { name } = parse(TeamParams, req.params);
    return s.teams.setLimits(req.principal, name, parse(UpdateTeamLimitsRequest, req.body));
  });

  app.post("/v1/keys", async (req, reply) => {
    const body = parse(CreateApiKeyRequest, req.body);
    return reply.status(201).send(await s.teams.createKey(req.principal, body.team, body.admin));
  });

  app.get("/v1/keys", async (req) => ({ keys: await s.teams.listKeys(req.principal) }));

  app.delete("/v1/keys/:id", async (req) => {
    const { id } = parse(KeyParams, req.params);
    return s.teams.revokeKey(req.principal, id);
  });
}
