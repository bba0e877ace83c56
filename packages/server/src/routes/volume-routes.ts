import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";
import { fileApiRoutes } from "./file-routes.js";

const Params = z.object({ id: z.string().min(1).max(64) });

/** Volumes (by id or name) and their files, with no sandbox (docs/volumes.md). */
export function volumeRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/volumes", async (req, reply) => reply.status(201).send(await s.volumes.create(req.principal.teamId, req.body)));

  app.get("/v1/volumes", async (req) => ({ volumes: await s.volumes.list(req.principal.teamId) }));

  app.get("/v1/volumes/:id", async (req) => s.volumes.get(req.principal.teamId, parse(Params, req.params).id));

  app.delete("/v1/volumes/:id", async (req, reply) => {
    await s.volumes.delete(req.principal.teamId, parse(Params, req.params).id);
    return reply.status(204).send();
  });

  const v = s.volumes;
  fileApiRoutes(app, "/v1/volumes", {
    download: (team, ref, p, opts) => v.download(team, ref, p, opts),
    upload: (team, ref, p, body, mode) => v.upload(team, ref, p, body, mode),
    remove: (team, ref, p, recursive) => v.remove(team, ref, p, recursive),
    stat: v.stat,
    list: v.listFiles,
    mkdir: (team, ref, p, parents, mode) => v.mkdir(team, ref, p, parents, mode),
  });
}
