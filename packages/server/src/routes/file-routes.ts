import { FileQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";
import { mkdirBody, modeOf, rangeOf, recursiveOf, sendDownload, uploadBody } from "./file-replies.js";

const Params = z.object({ id: z.string().min(1).max(64) });

export function fileRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/sandboxes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    const abort = new AbortController();
    const dl = await s.files.download(req.principal.teamId, id, q.path, { ...rangeOf(q), signal: abort.signal });
    return sendDownload(reply, dl, abort);
  });

  app.put("/v1/sandboxes/:id/files", async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return s.files.upload(req.principal.teamId, id, q.path, uploadBody(req), modeOf(q));
  });

  app.delete("/v1/sandboxes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    await s.files.remove(req.principal.teamId, id, q.path, recursiveOf(q));
    return reply.status(204).send();
  });

  app.get("/v1/sandboxes/:id/files/stat", async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return s.files.stat(req.principal.teamId, id, q.path);
  });

  app.get("/v1/sandboxes/:id/files/list", async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return s.files.list(req.principal.teamId, id, q.path);
  });

  app.post("/v1/sandboxes/:id/files/mkdir", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const body = mkdirBody(req);
    return reply.status(201).send(await s.files.mkdir(req.principal.teamId, id, body.path, body.parents, body.mode));
  });
}
