import { Readable } from "node:stream";
import { FileQuery, MkdirRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });

export function fileRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/sandboxes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    const abort = new AbortController();
    const dl = await s.files.download(req.principal.teamId, id, q.path, {
      ...(q.offset !== undefined ? { offset: q.offset } : {}),
      ...(q.length !== undefined ? { length: q.length } : {}),
      signal: abort.signal,
    });
    const body = Readable.from(dl.chunks);
    reply.raw.on("close", () => {
      abort.abort();
      body.destroy();
    });
    return reply.header("content-type", "application/octet-stream").header("content-length", String(dl.size)).send(body);
  });

  app.put("/v1/sandboxes/:id/files", async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return s.files.upload(
      req.principal.teamId,
      id,
      q.path,
      req.body as Readable,
      q.mode ? Number.parseInt(q.mode, 8) : undefined,
    );
  });

  app.delete("/v1/sandboxes/:id/files", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    await s.files.remove(req.principal.teamId, id, q.path, q.recursive === "true" || q.recursive === "1");
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
    const body = parse(MkdirRequest, req.body);
    return reply.status(201).send(await s.files.mkdir(req.principal.teamId, id, body.path, body.parents, body.mode));
  });
}
