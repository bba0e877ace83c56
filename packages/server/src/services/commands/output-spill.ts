import { closeSync, createReadStream, createWriteStream, mkdirSync, openSync, statSync, type WriteStream } from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import { SandtreeError } from "@sandtree/protocol";

/** Each stream of a buffered exec is kept whole on the host up to this size. */
export const DEFAULT_SPILL_CAP_BYTES = 4 * 1024 ** 3;

export type OutputStream = "stdout" | "stderr";
const EXEC_ID = /^ex-[0-9a-f]{16}$/;

/**
 * Writes an exec's stdout and stderr to `<dir>/<execId>.{stdout,stderr}` as they arrive,
 * waiting on the disk (so the guest is throttled by flow control, never buffered in memory).
 */
export class OutputSpill {
  /** Opened at a stream's first bytes: most commands print little or nothing on one stream. */
  private readonly files: Partial<Record<OutputStream, WriteStream>> = {};
  readonly bytes: Record<OutputStream, number> = { stdout: 0, stderr: 0 };
  readonly truncated: Record<OutputStream, boolean> = { stdout: false, stderr: false };
  private closed: Promise<void> | null = null;

  constructor(
    private readonly dir: string,
    private readonly execId: string,
    private readonly capBytes: number,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  private fileOf(stream: OutputStream): string {
    return path.join(this.dir, `${this.execId}.${stream}`);
  }

  async write(stream: OutputStream, data: Buffer): Promise<void> {
    const kept = this.bytes[stream];
    this.bytes[stream] += data.length;
    const room = this.capBytes - kept;
    if (room <= 0) {
      this.truncated[stream] = true;
      return;
    }
    const chunk = data.length > room ? data.subarray(0, room) : data;
    if (chunk.length < data.length) this.truncated[stream] = true;
    if (this.closed) return;
    let file = this.files[stream];
    if (!file) {
      file = createWriteStream(this.fileOf(stream), { mode: 0o600 });
      file.on("error", () => {});
      this.files[stream] = file;
    }
    if (file.destroyed) return;
    if (!file.write(chunk)) await drained(file);
  }

  /** Flushes and closes both files (a stream that printed nothing gets an empty one). Idempotent. */
  close(): Promise<void> {
    this.closed ??= Promise.all(
      (["stdout", "stderr"] as const).map((stream) => {
        const f = this.files[stream];
        if (!f) {
          try {
            closeSync(openSync(this.fileOf(stream), "w", 0o600));
          } catch {}
          return Promise.resolve();
        }
        return new Promise<void>((resolve) => {
          if (f.destroyed) return resolve();
          f.end(() => resolve());
          f.once("error", () => resolve());
        });
      }),
    ).then(() => {});
    return this.closed;
  }
}

/** The first `cap` bytes of a stream in one growing buffer (no chunk list, no final concat). */
export class HeadBuffer {
  private buf = Buffer.allocUnsafe(0);
  private used = 0;
  truncated = false;

  constructor(private readonly cap: number) {}

  push(data: Buffer): void {
    const n = Math.min(data.length, this.cap - this.used);
    if (n < data.length) this.truncated = true;
    if (n <= 0) return;
    if (this.used + n > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.cap, Math.max(64 * 1024, this.buf.length * 2, this.used + n)));
      this.buf.copy(grown, 0, 0, this.used);
      this.buf = grown;
    }
    data.copy(this.buf, this.used, 0, n);
    this.used += n;
  }

  /** The kept bytes as UTF-8; releases the buffer. */
  take(): string {
    const text = this.buf.toString("utf8", 0, this.used);
    this.buf = Buffer.allocUnsafe(0);
    return text;
  }
}

/** Resolves once the stream drains or closes; removes its listeners either way. */
function drained(file: WriteStream): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      file.off("drain", done);
      file.off("close", done);
      resolve();
    };
    file.on("drain", done);
    file.on("close", done);
  });
}

/** A byte range of a spilled stream: its stream and length (the file may still be growing). */
export function readSpilled(
  dir: string,
  execId: string,
  stream: OutputStream,
  offset: number,
  length: number | undefined,
): { size: number; total: number; body: Readable | null } {
  if (!EXEC_ID.test(execId)) throw new SandtreeError("NOT_FOUND", `exec ${execId} not found`, { exec_id: execId });
  const file = path.join(dir, `${execId}.${stream}`);
  let total: number;
  try {
    total = statSync(file).size;
  } catch {
    throw new SandtreeError("NOT_FOUND", `no output kept for exec ${execId} (only buffered execs keep it)`, {
      exec_id: execId,
    });
  }
  const size = Math.max(0, Math.min(total - offset, length ?? Number.POSITIVE_INFINITY));
  if (size === 0) return { size, total, body: null };
  return { size, total, body: createReadStream(file, { start: offset, end: offset + size - 1 }) };
}
