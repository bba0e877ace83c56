import { SandtreeError } from "@sandtree/protocol";

/** One part of a multipart/form-data body; read `body` to the end before asking for the next part. */
export interface Part {
  name: string | undefined;
  filename: string | undefined;
  body: AsyncIterable<Buffer>;
}

const MAX_HEADER_BYTES = 16 * 1024;

/** The boundary of a `multipart/form-data; boundary=...` content type, or null. */
export function boundaryOf(contentType: string | undefined): string | null {
  if (!contentType || !/^multipart\/form-data\b/i.test(contentType)) return null;
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m?.[1] ?? m?.[2] ?? null;
}

function malformed(why: string): SandtreeError {
  return new SandtreeError("BAD_REQUEST", `malformed multipart body: ${why}`);
}

class Reader {
  buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Uint8Array>;
  constructor(source: AsyncIterable<Uint8Array>) {
    this.it = source[Symbol.asyncIterator]();
  }
  async more(): Promise<boolean> {
    const r = await this.it.next();
    if (r.done) return false;
    this.buf = this.buf.length === 0 ? Buffer.from(r.value) : Buffer.concat([this.buf, r.value]);
    return true;
  }
}

/** A part's bytes up to the next delimiter; everything past it stays in the reader. */
async function* partBody(r: Reader, delimiter: Buffer): AsyncGenerator<Buffer> {
  for (;;) {
    const i = r.buf.indexOf(delimiter);
    if (i >= 0) {
      if (i > 0) yield r.buf.subarray(0, i);
      r.buf = r.buf.subarray(i + delimiter.length);
      return;
    }
    // Hold back what could be the start of a delimiter split across chunks.
    const keep = delimiter.length - 1;
    if (r.buf.length > keep) {
      const out = r.buf.subarray(0, r.buf.length - keep);
      r.buf = r.buf.subarray(r.buf.length - keep);
      yield out;
    }
    if (!(await r.more())) throw malformed("it ended inside a part");
  }
}

/** The parts of a multipart body, streamed: no part is held in memory whole. */
export async function* multipartParts(source: AsyncIterable<Uint8Array>, boundary: string): AsyncGenerator<Part> {
  const r = new Reader(source);
  const first = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let at = r.buf.indexOf(first);
  while (at < 0) {
    if (!(await r.more())) throw malformed("no boundary");
    at = r.buf.indexOf(first);
  }
  r.buf = r.buf.subarray(at + first.length);
  for (;;) {
    while (r.buf.length < 2) if (!(await r.more())) throw malformed("it ended after a boundary");
    if (r.buf[0] === 0x2d && r.buf[1] === 0x2d) return;
    let end = r.buf.indexOf("\r\n\r\n");
    while (end < 0) {
      if (r.buf.length > MAX_HEADER_BYTES) throw malformed("a part's headers are too long");
      if (!(await r.more())) throw malformed("it ended in a part's headers");
      end = r.buf.indexOf("\r\n\r\n");
    }
    const head = r.buf.subarray(0, end).toString("utf8");
    r.buf = r.buf.subarray(end + 4);
    const disposition = /content-disposition:([^\r\n]*)/i.exec(head)?.[1] ?? "";
    const body = partBody(r, delimiter);
    yield {
      name: /\bname="([^"]*)"/i.exec(disposition)?.[1],
      filename: /\bfilename="([^"]*)"/i.exec(disposition)?.[1],
      body,
    };
    // Whatever the consumer left of the part is skipped.
    for await (const _ of body) {
    }
  }
}
