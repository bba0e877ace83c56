import type { Readable } from "node:stream";
import { FileQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";
import { mkdirBody, modeOf, rangeOf, recursiveOf, sendDownload, uploadBody } from "./file-replies.js";

const Params = z.object({ id: z.string().min(1).max(64) });

/** The file calls of something that holds files: a sandbox (FileService) or a volume (VolumeService). */
export interface FileApi {
  download(
    teamId: string,
    id: string,
    p: string,
    opts: { offset?: number; length?: number; signal?: AbortSignal },
  ): Promise<{ size: number; chunks: AsyncIterable<Uint8Array> }>;
  upload(teamId: string, id: string, p: string, body: Readable, mode: number | undefined): Promise<unknown>;
  remove(teamId: string, id: string, p: string, recursive: boolean): Promise<void>;
  stat(teamId: string, id: string, p: string): Promise<unknown>;
  list(teamId: string, id: string, p: string): Promise<unknown>;
  mkdir(teamId: string, id: string, p: string, parents: boolean, mode: number): Promise<unknown>;
}

/** `${base}/:id/files` (GET downloads, PUT uploads, DELETE removes) and its stat, list and mkdir. */
export function fileApiRoutes(app: FastifyInstance, base: string, files: FileApi): void {
  app.get(`${base}/:id/files`, async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    const abort = new AbortController();
    const dl = await files.download(req.principal.teamId, id, q.path, { ...rangeOf(q), signal: abort.signal });
    return sendDownload(reply, dl, abort);
  });

  app.put(`${base}/:id/files`, async (req) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    return files.upload(req.principal.teamId, id, q.path, uploadBody(req), modeOf(q));
  });

  app.delete(`${base}/:id/files`, async (req, reply) => {
    const { id } = parse(Params, req.params);
    const q = parse(FileQuery, req.query);
    await files.remove(req.principal.teamId, id, q.path, recursiveOf(q));
    return reply.status(204).send();
  });

  app.get(`${base}/:id/files/stat`, async (req) => {
    const { id } = parse(Params, req.params);
    return files.stat(req.principal.teamId, id, parse(FileQuery, req.query).path);
  });

  app.get(`${base}/:id/files/list`, async (req) => {
    const { id } = parse(Params, req.params);
    return files.list(req.principal.teamId, id, parse(FileQuery, req.query).path);
  });

  app.post(`${base}/:id/files/mkdir`, async (req, reply) => {
    const { id } = parse(Params, req.params);
    const body = mkdirBody(req);
    return reply.status(201).send(await files.mkdir(req.principal.teamId, id, body.path, body.parents, body.mode));
  });
}

export function fileRoutes(app: FastifyInstance, s: Services): void {
  fileApiRoutes(app, "/v1/sandboxes", s.files);
}
