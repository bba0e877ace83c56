import { FRAME_HEADER_BYTES, FRAME_MAGIC, FRAME_MAX_PAYLOAD } from "@sandtree/protocol";

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function encodeFrame(type: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  if (payload.length > FRAME_MAX_PAYLOAD) throw new RangeError(`frame payload ${payload.length} > ${FRAME_MAX_PAYLOAD}`);
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt16LE(FRAME_MAGIC, 0);
  header.writeUInt8(type, 2);
  header.writeUInt8(0, 3);
  header.writeUInt32LE(stream >>> 0, 4);
  header.writeUInt32LE(payload.length, 8);
  return payload.length === 0 ? header : Buffer.concat([header, payload]);
}

/**
 * Incremental decoder. Bytes that do not start a valid header are skipped one at a time,
 * so the reader resynchronises after garbage or a half-sent frame from before a restore.
 * A frame larger than a socket read waits as a list of chunks and is joined once, when it is
 * complete (joining at every read would copy a 1 MiB frame some sixteen times).
 */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private waiting: Buffer[] = [];
  private waitingBytes = 0;
  /** Bytes `buf` plus `waiting` must hold before the next frame is complete. */
  private need = 0;
  skippedBytes = 0;

  push(chunk: Buffer): Frame[] {
    if (this.need > 0 && this.buf.length + this.waitingBytes + chunk.length < this.need) {
      this.waiting.push(chunk);
      this.waitingBytes += chunk.length;
      return [];
    }
    this.buf = this.buf.length === 0 && this.waiting.length === 0 ? chunk : Buffer.concat([this.buf, ...this.waiting, chunk]);
    this.waiting = [];
    this.waitingBytes = 0;
    this.need = 0;
    const frames: Frame[] = [];
    let off = 0;
    while (this.buf.length - off >= FRAME_HEADER_BYTES) {
      const magic = this.buf.readUInt16LE(off);
      const len = this.buf.readUInt32LE(off + 8);
      if (magic !== FRAME_MAGIC || len > FRAME_MAX_PAYLOAD) {
        off += 1;
        this.skippedBytes += 1;
        continue;
      }
      if (this.buf.length - off < FRAME_HEADER_BYTES + len) {
        this.need = FRAME_HEADER_BYTES + len;
        break;
      }
      const payload = this.buf.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + len);
      frames.push({
        type: this.buf.readUInt8(off + 2),
        flags: this.buf.readUInt8(off + 3),
        stream: this.buf.readUInt32LE(off + 4),
        // A small payload is copied so that it does not keep a large read buffer alive.
        payload: len * 4 >= this.buf.length ? payload : Buffer.from(payload),
      });
      off += FRAME_HEADER_BYTES + len;
    }
    this.buf = off === 0 ? this.buf : Buffer.from(this.buf.subarray(off));
    return frames;
  }
}

export type TlvValue = string | Buffer | { u32: number } | { u64: bigint | number };

/** Encodes request TLVs: `u8 tag, u32 length, bytes`. */
export function encodeTlv(entries: Array<[number, TlvValue]>): Buffer {
  const parts: Buffer[] = [];
  for (const [tag, value] of entries) {
    let body: Buffer;
    if (typeof value === "string") {
      if (value.includes("\0")) throw new RangeError("TLV strings must not contain NUL");
      body = Buffer.from(value, "utf8");
    } else if (Buffer.isBuffer(value)) {
      body = value;
    } else if ("u32" in value) {
      body = Buffer.allocUnsafe(4);
      body.writeUInt32LE(value.u32 >>> 0, 0);
    } else {
      body = Buffer.allocUnsafe(8);
      body.writeBigUInt64LE(BigInt(value.u64), 0);
    }
    const head = Buffer.allocUnsafe(5);
    head.writeUInt8(tag, 0);
    head.writeUInt32LE(body.length, 1);
    parts.push(head, body);
  }
  return Buffer.concat(parts);
}
