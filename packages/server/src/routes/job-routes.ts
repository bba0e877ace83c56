import { Readable } from "node:stream";
import { KillJobRequest, OutputQuery, StartJobRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const JobParams = z.object({ id: z.string().min(1).max(64), jobId: z.string().min(1).max(64) });

export function jobRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/jobs", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const body = parse(StartJobRequest, req.body);
    return reply.status(201).send(await s.jobs.start(req.principal.teamId, id, body));
  });

  app.get("/v1/sandboxes/:id/jobs", async (req) => {
    const { id } = parse(Params, req.params);
    return s.jobs.list(req.principal.teamId, id);
  });

  app.get("/v1/sandboxes/:id/jobs/:jobId", async (req) => {
    const { id, jobId } = parse(JobParams, req.params);
    return s.jobs.get(req.principal.teamId, id, jobId);
  });

  app.get("/v1/sandboxes/:id/jobs/:jobId/output", async (req, reply) => {
    const { id, jobId } = parse(JobParams, req.params);
    const q = parse(OutputQuery, req.query);
    const abort = new AbortController();
    const out = await s.jobs.output(
      req.principal.teamId,
      id,
      jobId,
      { stream: q.stream, offset: q.offset, ...(q.length !== undefined ? { length: q.length } : {}) },
      abort.signal,
    );
    const body = Readable.from(out.chunks);
    reply.raw.on("close", () => {
      abort.abort();
      body.destroy();
    });
    return reply
      .header("content-type", "application/octet-stream")
      .header("content-length", String(out.size))
      .header("x-sandtree-stream-bytes", String(out.total))
      .send(body);
  });

  app.post("/v1/sandboxes/:id/jobs/:jobId/kill", async (req) => {
    const { id, jobId } = parse(JobParams, req.params);
    const { signal } = parse(KillJobRequest, req.body ?? {});
    return s.jobs.kill(req.principal.teamId, id, jobId, signal);
  });
}
