import { Readable } from "node:stream";
import {
  EXEC_STREAM_CONTENT_TYPE,
  ExecRecordKind,
  ExecRequest,
  type ExecStreamEvent,
  encodeExecEvent,
  execRecordHeader,
  SignalRequest,
} from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const ExecParams = z.object({ id: z.string().min(1).max(64), execId: z.string().min(1).max(64) });

type StreamMode = "binary" | "ndjson" | "sse";

function wantsStream(accept: string | undefined): StreamMode | null {
  if (!accept) return null;
  if (accept.includes(EXEC_STREAM_CONTENT_TYPE)) return "binary";
  if (accept.includes("application/x-ndjson")) return "ndjson";
  if (accept.includes("text/event-stream")) return "sse";
  return null;
}

const CONTENT_TYPES: Record<StreamMode, string> = {
  binary: EXEC_STREAM_CONTENT_TYPE,
  ndjson: "application/x-ndjson",
  sse: "text/event-stream",
};

/** The events in the wire form asked for. Binary output goes out as the agent's buffers. */
async function* encode(events: AsyncIterable<ExecStreamEvent>, mode: StreamMode): AsyncGenerator<Uint8Array | string> {
  for await (const ev of events) {
    if (mode === "binary") {
      if (ev.type !== "stdout" && ev.type !== "stderr") yield encodeExecEvent(ev);
      else if (ev.data.length > 0) {
        yield execRecordHeader(ev.type === "stdout" ? ExecRecordKind.STDOUT : ExecRecordKind.STDERR, ev.data.length);
        yield ev.data;
      }
      continue;
    }
    // base64 needs no JSON escaping, so an output line is built as is (the bytes JSON.stringify
    // gives, without scanning a 350 KB string once more).
    const json =
      ev.type === "stdout" || ev.type === "stderr"
        ? `{"type":"${ev.type}","data":"${Buffer.from(ev.data.buffer, ev.data.byteOffset, ev.data.length).toString("base64")}"}`
        : JSON.stringify(ev);
    yield mode === "ndjson" ? `${json}\n` : `event: ${ev.type}\ndata: ${json}\n\n`;
  }
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
    const body$ = Readable.from(encode(events, mode), { objectMode: false });
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) gone.abort();
      body$.destroy();
    });
    return reply.header("content-type", CONTENT_TYPES[mode]).header("cache-control", "no-cache").send(body$);
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
