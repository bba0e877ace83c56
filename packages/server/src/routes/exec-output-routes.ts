import { OutputQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const ExecParams = z.object({ id: z.string().min(1).max(64), execId: z.string().min(1).max(64) });

export function execOutputRoutes(app: FastifyInstance, s: Services): void {
  // The whole stdout/stderr of a buffered exec, kept on the host until the sandbox is deleted.
  app.get("/v1/sandboxes/:id/execs/:execId/output", async (req, reply) => {
    const { id, execId } = parse(ExecParams, req.params);
    const q = parse(OutputQuery, req.query);
    const out = await s.exec.output(req.principal.teamId, id, execId, {
      stream: q.stream,
      offset: q.offset,
      ...(q.length !== undefined ? { length: q.length } : {}),
    });
    reply
      .header("content-type", "application/octet-stream")
      .header("content-length", String(out.size))
      .header("x-sandtree-stream-bytes", String(out.total));
    if (!out.body) return reply.send("");
    reply.raw.on("close", () => out.body?.destroy());
    return reply.send(out.body);
  });
}
