import { Readable } from "node:stream";
import { type ExecEvent, ExecRequest, SignalRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const ExecParams = z.object({ id: z.string().min(1).max(64), execId: z.string().min(1).max(64) });

function wantsStream(accept: string | undefined): "ndjson" | "sse" | null {
  if (!accept) return null;
  if (accept.includes("application/x-ndjson")) return "ndjson";
  if (accept.includes("text/event-stream")) return "sse";
  return null;
}

export function execRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/:id/exec", { bodyLimit: 32 * 1024 * 1024 }, async (req, reply) => {
    const { id } = parse(Params, req.params);
    const body = parse(ExecRequest, req.body);
    const mode = wantsStream(req.headers.accept);
    if (!mode) return s.exec.runBuffered(req.principal.teamId, id, body);
    // The client going away must kill the command even when it is silent: the generator below
    // only notices a destroyed stream at its next event, which a silent command never sends.
    const gone = new AbortController();
    const events = await s.exec.stream(req.principal.teamId, id, body, gone.signal);
    const encode = (ev: ExecEvent) => {
      // Output is most of the bytes: base64 needs no JSON escaping, so its line is built as is
      // (the same bytes JSON.stringify gives, without scanning a 350 KB string once more).
      const json =
        ev.type === "stdout" || ev.type === "stderr" ? `{"type":"${ev.type}","data":"${ev.data}"}` : JSON.stringify(ev);
      return mode === "ndjson" ? `${json}\n` : `event: ${ev.type}\ndata: ${json}\n\n`;
    };
    const body$ = Readable.from(
      (async function* () {
        for await (const ev of events) yield encode(ev);
      })(),
      { objectMode: false },
    );
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) gone.abort();
      body$.destroy();
    });
    return reply
      .header("content-type", mode === "ndjson" ? "application/x-ndjson" : "text/event-stream")
      .header("cache-control", "no-cache")
      .send(body$);
  });

  app.post("/v1/sandboxes/:id/execs/:execId/signal", async (req, reply) => {
    const { id, execId } = parse(ExecParams, req.params);
    const { signal } = parse(SignalRequest, req.body ?? {});
    s.exec.signal(req.principal.teamId, id, execId, signal);
    return reply.status(204).send();
  });

  app.post("/v1/sandboxes/:id/execs/:execId/stdin", async (req, reply) => {
    const { id, execId } = parse(ExecParams, req.params);
    const { close } = parse(z.object({ close: z.enum(["true", "false", "1", "0"]).optional() }), req.query);
    await s.exec.writeStdin(req.principal.teamId, id, execId, req.body as Readable, close === "true" || close === "1");
    return reply.status(204).send();
  });
}
