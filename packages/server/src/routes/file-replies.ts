import { Readable } from "node:stream";
import { type FileQuery, MkdirRequest } from "@sandtree/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { parse } from "../errors.js";

// What the sandbox file routes and the volume file routes share: the same query, the same
// streaming of a download (stopped when the client goes), the same mode and flag parsing.

type Query = z.output<typeof FileQuery>;

/** Streams a download's chunks as the body; `abort` fires when the client goes away. */
export function sendDownload(
  reply: FastifyReply,
  dl: { size: number; chunks: AsyncIterable<Uint8Array> },
  abort?: AbortController,
): FastifyReply {
  const body = Readable.from(dl.chunks);
  reply.raw.on("close", () => {
    abort?.abort();
    body.destroy();
  });
  return reply.header("content-type", "application/octet-stream").header("content-length", String(dl.size)).send(body);
}

/** The byte range asked for (offset, length), only the fields given. */
export function rangeOf(q: Query): { offset?: number; length?: number } {
  return { ...(q.offset !== undefined ? { offset: q.offset } : {}), ...(q.length !== undefined ? { length: q.length } : {}) };
}

/** `mode=644` as a number (undefined: the default of the write). */
export function modeOf(q: Query): number | undefined {
  return q.mode ? Number.parseInt(q.mode, 8) : undefined;
}

export function recursiveOf(q: Query): boolean {
  return q.recursive === "true" || q.recursive === "1";
}

/** The upload's body: streamed, never buffered (app.ts's content type parsers). */
export function uploadBody(req: FastifyRequest): Readable {
  return req.body as Readable;
}

export function mkdirBody(req: FastifyRequest): z.output<typeof MkdirRequest> {
  return parse(MkdirRequest, req.body);
}
