import { Readable } from "node:stream";
import { type FileQuery, MkdirRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { parse } from "../errors.js";

// What the sandbox file routes and the volume file routes share: the same query, the same
// streaming of a download (stopped when the client goes), the same mode and flag parsing.

type Query = z.output<typeof FileQuery>;

/**
 * Streams a download's chunks as the body, `content-length: dl.size`; `abort` fires when the
 * client goes away. The headers wait for the first chunk, so an error until then is answered as
 * one (a 404, a 409). A body that ends short (the file shrank since its size was taken) is such
 * an error, or after the first byte a cut connection: never a reply that leaves the client
 * waiting for bytes that do not come.
 */
export async function sendDownload(
  reply: FastifyReply,
  dl: { size: number; chunks: AsyncIterable<Uint8Array> },
  abort?: AbortController,
): Promise<FastifyReply> {
  let body: Readable | undefined;
  reply.raw.on("close", () => {
    abort?.abort();
    body?.destroy();
  });
  const chunks = exactly(dl.chunks, dl.size);
  const first = await chunks.next();
  body = Readable.from(first.done ? [] : startingWith(first.value, chunks));
  return reply.header("content-type", "application/octet-stream").header("content-length", String(dl.size)).send(body);
}

async function* startingWith<T>(first: T, rest: AsyncIterable<T>): AsyncGenerator<T> {
  yield first;
  yield* rest;
}

/** The first `size` bytes of `chunks`; fewer is an error (CONFLICT: the source changed while read). */
async function* exactly(chunks: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Uint8Array> {
  let sent = 0;
  for await (const chunk of chunks) {
    if (sent >= size) break;
    const part = chunk.length > size - sent ? chunk.subarray(0, size - sent) : chunk;
    sent += part.length;
    // An empty chunk would send the headers (200) when an error may still come instead.
    if (part.length > 0) yield part;
  }
  if (sent < size) {
    throw new SandtreeError(
      "CONFLICT",
      `the file ended at ${sent} of the ${size} bytes its size said: it changed while it was read; read it again`,
      { bytes: sent, size },
    );
  }
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
