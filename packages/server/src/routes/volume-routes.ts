import { FileQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";
import { mkdirBody, modeOf, rangeOf, recursiveOf, sendDownload, uploadBody } from "./file-replies.js";

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

  app.get("/v1/volumes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return sendDownload(reply, await s.volumes.download(req.principal.teamId, id, q.path, rangeOf(q)));
  });

  app.put("/v1/volumes/:id/files", async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return s.volumes.upload(req.principal.teamId, id, q.path, uploadBody(req), modeOf(q));
  });

  app.delete("/v1/volumes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    await s.volumes.remove(req.principal.teamId, id, q.path, recursiveOf(q));
    return reply.status(204).send();
  });

  app.get("/v1/volumes/:id/files/stat", async (req) => {
    const { id } = parse(Params, req.params);
    return s.volumes.stat(req.principal.teamId, id, parse(FileQuery, req.query).path);
  });

  app.get("/v1/volumes/:id/files/list", async (req) => {
    const { id } = parse(Params, req.params);
    return s.volumes.listFiles(req.principal.teamId, id, parse(FileQuery, req.query).path);
  });

  app.post("/v1/volumes/:id/files/mkdir", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const body = mkdirBody(req);
    return reply.status(201).send(await s.volumes.mkdir(req.principal.teamId, id, body.path, body.parents, body.mode));
  });
}
