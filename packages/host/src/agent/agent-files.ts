import { Flag, FrameType, GuestBytesSchema, GuestStatSchema, Tag } from "@sandtree/protocol";
import { FILE_CHUNK, guestError, parseReply, type StatInfo, type StreamHandler } from "./agent-types.js";
import { CreditQueue } from "./credit-queue.js";
import { encodeTlv, type TlvValue } from "./frame-codec.js";
import { GuestError } from "./guest-error.js";

// File transfers over the agent connection (docs/protocol.md): reads and listings as DATA
// streams with flow control, writes as DATA frames answered by one RESULT.

/** The most a directory listing may hold in the host's memory (a guest could stream one forever). */
export const LIST_MAX_BYTES = 64 * 1024 * 1024;

/** What the file calls need of the connection (AgentClient). */
export interface StreamConnection {
  openStream(handler: StreamHandler): number;
  endStream(id: number): void;
  hasStream(id: number): boolean;
  sendRaw(type: number, stream: number, payload?: Buffer): boolean;
  sendData(type: number, stream: number, payload: Buffer): Promise<void>;
  sendWindow(stream: number, bytes: number): void;
  /** Closes the connection for good: the guest broke the protocol. */
  violate(err: unknown): void;
}

/** A request answered by DATA frames then END (or ERROR), delivered with flow control. */
function dataStream(
  conn: StreamConnection,
  type: number,
  entries: Array<[number, TlvValue]>,
  signal?: AbortSignal,
): AsyncIterable<Buffer> {
  const queue = new CreditQueue<Buffer>((n) => conn.sendWindow(id, n), { what: () => `data stream ${id}` });
  const id = conn.openStream({
    onFrame: (f) => {
      if (f.type === FrameType.DATA) queue.push(f.payload, f.payload.length);
      else if (f.type === FrameType.END) {
        conn.endStream(id);
        queue.end();
      } else if (f.type === FrameType.ERROR) {
        conn.endStream(id);
        queue.fail(guestError(f.payload));
      }
    },
    onClose: (err) => queue.fail(err),
  });
  conn.sendRaw(type, id, encodeTlv(entries));
  const cancel = () => {
    if (conn.hasStream(id)) conn.sendRaw(FrameType.CANCEL, id);
  };
  signal?.addEventListener("abort", cancel, { once: true });
  return {
    async *[Symbol.asyncIterator]() {
      try {
        for await (const chunk of queue) yield chunk;
      } finally {
        signal?.removeEventListener("abort", cancel);
        cancel();
      }
    },
  };
}

export function readFileStream(
  conn: StreamConnection,
  path: string,
  opts: { offset?: number; length?: number; signal?: AbortSignal },
): AsyncIterable<Buffer> {
  const entries: Array<[number, TlvValue]> = [[Tag.PATH, path]];
  if (opts.offset !== undefined) entries.push([Tag.OFFSET, { u64: opts.offset }]);
  if (opts.length !== undefined) entries.push([Tag.LENGTH, { u64: opts.length }]);
  return dataStream(conn, FrameType.FILE_READ, entries, opts.signal);
}

export async function listDir(conn: StreamConnection, path: string): Promise<StatInfo[]> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of dataStream(conn, FrameType.LIST, [[Tag.PATH, path]])) {
    bytes += chunk.length;
    // Leaving the loop cancels the listing in the guest.
    if (bytes > LIST_MAX_BYTES) throw new GuestError("E2BIG", 7, `the listing of ${path} is larger than ${LIST_MAX_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return Buffer.concat(chunks)
      .toString("utf8")
      .split("\n")
      .filter((l) => l.length > 0)
      .map((l) => parseReply(GuestStatSchema, Buffer.from(l), "LIST entry"));
  } catch (err) {
    conn.violate(err);
    throw err;
  }
}

export async function writeFileStream(
  conn: StreamConnection,
  path: string,
  source: AsyncIterable<Uint8Array>,
  opts: { mode?: number; append?: boolean; signal?: AbortSignal },
): Promise<{ bytes: number }> {
  let failed: Error | null = null;
  let streamId = 0;
  const result = new Promise<{ bytes: number }>((resolve, reject) => {
    const id = conn.openStream({
      onFrame: (f) => {
        if (f.type === FrameType.RESULT) {
          const value = parseReply(GuestBytesSchema, f.payload, "RESULT of FILE_WRITE");
          conn.endStream(id);
          resolve(value);
        } else if (f.type === FrameType.ERROR) {
          conn.endStream(id);
          failed = guestError(f.payload);
          reject(failed);
        }
      },
      onClose: (err) => {
        failed = err;
        reject(err);
      },
    });
    streamId = id;
  });
  result.catch(() => {});
  conn.sendRaw(
    FrameType.FILE_WRITE,
    streamId,
    encodeTlv([
      [Tag.PATH, path],
      [Tag.MODE, { u32: opts.mode ?? 0o644 }],
      [Tag.FLAGS, { u32: opts.append ? Flag.APPEND : 0 }],
    ]),
  );
  try {
    for await (const chunk of source) {
      opts.signal?.throwIfAborted();
      if (failed) break;
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      for (let off = 0; off < buf.length && !failed; off += FILE_CHUNK) {
        await conn.sendData(FrameType.DATA, streamId, buf.subarray(off, off + FILE_CHUNK));
      }
    }
  } catch (err) {
    // Tell the guest to stop; it answers with an error or result we no longer need.
    conn.sendRaw(FrameType.CANCEL, streamId);
    throw err;
  }
  if (!failed) conn.sendRaw(FrameType.END, streamId);
  return result;
}
