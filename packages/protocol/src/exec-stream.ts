// The binary form of a streamed exec (docs/api.md "Exec"): output bytes travel as they are,
// without the base64 and JSON of the NDJSON form (which cost more than the transfer itself).
// A stream is a run of records: a 1-byte kind, a 4-byte big-endian length, then that many bytes.
// Kind 1 is stdout, 2 stderr, 3 one JSON ExecEvent other than output (started, exit, error).
import { ExecEvent } from "./exec.js";

export const EXEC_STREAM_CONTENT_TYPE = "application/vnd.sandtree.exec-stream";
export const EXEC_RECORD_HEADER_BYTES = 5;
/** Longest record a decoder accepts (the server's are at most a few hundred KiB). */
export const EXEC_RECORD_MAX_BYTES = 64 * 1024 * 1024;

export const ExecRecordKind = { STDOUT: 1, STDERR: 2, EVENT: 3 } as const;

/** An exec event with its output as bytes (what a binary stream carries, decoded). */
export type ExecStreamEvent =
  | { type: "stdout"; data: Uint8Array }
  | { type: "stderr"; data: Uint8Array }
  | Exclude<ExecEvent, { type: "stdout" | "stderr" }>;

/** The 5-byte header of one record; the payload follows it. */
export function execRecordHeader(kind: number, length: number): Uint8Array {
  const h = new Uint8Array(EXEC_RECORD_HEADER_BYTES);
  h[0] = kind;
  new DataView(h.buffer).setUint32(1, length);
  return h;
}

/** One record whole: header and payload (events; output is sent as header + its own buffer). */
export function encodeExecEvent(ev: Exclude<ExecEvent, { type: "stdout" | "stderr" }>): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(ev));
  const out = new Uint8Array(EXEC_RECORD_HEADER_BYTES + json.length);
  out.set(execRecordHeader(ExecRecordKind.EVENT, json.length));
  out.set(json, EXEC_RECORD_HEADER_BYTES);
  return out;
}

export class ExecStreamFormatError extends Error {}

/**
 * Splits a binary exec stream into events, whatever the chunking of the bytes it is fed. Output
 * payloads that lie within one chunk are returned as views of it (no copy).
 */
export class ExecStreamDecoder {
  /** Copies of the bytes of an unfinished record, and how many it needs before parsing again. */
  private parts: Uint8Array[] = [];
  private partsBytes = 0;
  private needed = 0;
  private readonly text = new TextDecoder("utf-8");

  push(chunk: Uint8Array): ExecStreamEvent[] {
    let buf = chunk;
    if (this.parts.length > 0) {
      // Joined once the record is complete, not at every chunk (a record spans many chunks).
      this.parts.push(new Uint8Array(chunk)); // a copy (a Buffer's slice() would be a view)
      this.partsBytes += chunk.length;
      if (this.partsBytes < this.needed) return [];
      buf = concatBytes(this.parts, this.partsBytes);
      this.parts = [];
      this.partsBytes = 0;
    }
    const events: ExecStreamEvent[] = [];
    let at = 0;
    while (buf.length - at >= EXEC_RECORD_HEADER_BYTES) {
      const kind = buf[at] as number;
      const len = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
      if (kind < ExecRecordKind.STDOUT || kind > ExecRecordKind.EVENT) {
        throw new ExecStreamFormatError(`unknown exec stream record kind ${kind}`);
      }
      if (len > EXEC_RECORD_MAX_BYTES) throw new ExecStreamFormatError(`an exec stream record of ${len} bytes`);
      const end = at + EXEC_RECORD_HEADER_BYTES + len;
      if (end > buf.length) break;
      const payload = buf.subarray(at + EXEC_RECORD_HEADER_BYTES, end);
      if (kind === ExecRecordKind.EVENT) events.push(this.event(payload));
      else if (kind === ExecRecordKind.STDOUT) events.push({ type: "stdout", data: payload });
      else events.push({ type: "stderr", data: payload });
      at = end;
    }
    if (at < buf.length) {
      // Copy: the caller may reuse the chunk's buffer.
      const rest = new Uint8Array(buf.subarray(at));
      this.parts = [rest];
      this.partsBytes = rest.length;
      this.needed =
        rest.length < EXEC_RECORD_HEADER_BYTES
          ? EXEC_RECORD_HEADER_BYTES
          : EXEC_RECORD_HEADER_BYTES + new DataView(rest.buffer, rest.byteOffset + 1, 4).getUint32(0);
    }
    return events;
  }

  /** Bytes of an unfinished record at the end of the stream (0 when it ended cleanly). */
  get leftover(): number {
    return this.partsBytes;
  }

  private event(payload: Uint8Array): ExecStreamEvent {
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.text.decode(payload));
    } catch (err) {
      throw new ExecStreamFormatError(`an exec stream event is not JSON: ${(err as Error).message}`);
    }
    const ev = ExecEvent.safeParse(parsed);
    if (!ev.success || ev.data.type === "stdout" || ev.data.type === "stderr") {
      throw new ExecStreamFormatError(`unexpected exec stream event: ${JSON.stringify(parsed).slice(0, 200)}`);
    }
    return ev.data;
  }
}

/** The parts joined into one new array; `total` is their summed length when the caller knows it. */
export function concatBytes(parts: readonly Uint8Array[], total?: number): Uint8Array {
  const out = new Uint8Array(total ?? parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
