import type { ExecEvent, ExecStreamEvent, SignalRequest } from "@sandtree/protocol";
import { apiErrorFromCode, InvalidResponseError, SandtreeSdkError } from "./errors.js";
import { type ExecEventDecoder, execEventDecoder } from "./exec-decoders.js";
import type { HttpClient, RequestOptions } from "./http.js";
import { UnreadBuffer } from "./unread-buffer.js";

/** How a command ended: the `exit` event of the wire protocol, without its `type`. */
export type ExecExit = Omit<Extract<ExecEvent, { type: "exit" }>, "type">;

/** One item of `ExecHandle.output()`, in the order the server sent them. */
export type ExecOutputEvent =
  | { type: "stdout"; data: Uint8Array }
  | { type: "stderr"; data: Uint8Array }
  | ({ type: "exit" } & ExecExit);

export type ExecSignal = NonNullable<SignalRequest["signal"]>;

/** Bytes kept per stream that nobody is iterating (beyond that, further output is dropped and counted). */
export const DEFAULT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
/** Bytes queued for an iterated stream before we stop reading from the server (backpressure). */
const HIGH_WATER_MARK = 1024 * 1024;

interface Chunk {
  seq: number;
  data: Uint8Array;
}

class Channel extends UnreadBuffer<Chunk> {}

export interface ExecHandleInit {
  http: HttpClient;
  sandboxId: string;
  body: ReadableStream<Uint8Array>;
  /** The answer's content type: the binary exec stream, else NDJSON. */
  contentType?: string | null | undefined;
  mapError: (err: unknown) => unknown;
  maxBufferedBytes?: number | undefined;
}

/**
 * A running command. Output is read from the server only when someone needs it (an iterator,
 * wait(), output()), so a slow consumer slows the command down instead of filling memory.
 * Output of a stream nobody iterates yet is kept, up to `maxBufferedBytes` per stream.
 */
export class ExecHandle {
  readonly sandboxId: string;
  private readonly http: HttpClient;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly mapError: (err: unknown) => unknown;
  private readonly maxBuffered: number;
  private readonly decoder: ExecEventDecoder;
  private readonly out = new Channel();
  private readonly err = new Channel();
  private seq = 0;
  private _pid: number | undefined;
  private _execId: string | undefined;
  private exit: ExecExit | undefined;
  private failure: unknown;
  private ended = false;
  private reading: Promise<void> | undefined;
  private wake: { promise: Promise<void>; resolve: () => void } = deferred();

  constructor(init: ExecHandleInit) {
    this.http = init.http;
    this.sandboxId = init.sandboxId;
    this.reader = init.body.getReader();
    this.decoder = execEventDecoder(init.contentType ?? null);
    this.mapError = init.mapError;
    this.maxBuffered = init.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
  }

  /** The process id inside the sandbox (set once the command started). */
  get pid(): number | undefined {
    return this._pid;
  }

  /** The server's id of this exec, used by kill() and writeStdin(). */
  get execId(): string | undefined {
    return this._execId;
  }

  /** Output bytes dropped because a stream was not iterated and its buffer was full. */
  get droppedBytes(): { stdout: number; stderr: number } {
    return { stdout: this.out.dropped, stderr: this.err.dropped };
  }

  /** The command's stdout; one iteration at a time. Ends when the command exits. */
  get stdout(): AsyncIterable<Uint8Array> {
    return { [Symbol.asyncIterator]: () => this.iterate(this.out, "stdout") };
  }

  /** The command's stderr; one iteration at a time. Ends when the command exits. */
  get stderr(): AsyncIterable<Uint8Array> {
    return { [Symbol.asyncIterator]: () => this.iterate(this.err, "stderr") };
  }

  /** stdout and stderr interleaved in arrival order, then one `exit` event. */
  async *output(): AsyncGenerator<ExecOutputEvent, void, undefined> {
    this.attach(this.out, "stdout");
    try {
      this.attach(this.err, "stderr");
    } catch (e) {
      this.out.attached = false;
      throw e;
    }
    try {
      for (;;) {
        await this.until(() => this.out.chunks.length > 0 || this.err.chunks.length > 0);
        const o = this.out.chunks[0];
        const e = this.err.chunks[0];
        if (o && (!e || o.seq < e.seq)) {
          yield { type: "stdout", data: this.take(this.out) };
        } else if (e) {
          yield { type: "stderr", data: this.take(this.err) };
        } else {
          if (this.exit) yield { type: "exit", ...this.exit };
          else if (this.failure !== undefined) throw this.failure;
          return;
        }
      }
    } finally {
      this.out.attached = false;
      this.err.attached = false;
      this.notify();
    }
  }

  /** Resolves when the command exits; rejects with a typed error if the exec failed. */
  async wait(): Promise<ExecExit> {
    await this.until(() => this.exit !== undefined);
    if (this.exit) return this.exit;
    throw this.failure ?? new InvalidResponseError("the exec stream ended without an exit event");
  }

  /** Sends a signal to the command (SIGKILL by default). */
  async kill(signal: ExecSignal = "SIGKILL", options: RequestOptions = {}): Promise<void> {
    await this.http.empty({
      ...options,
      method: "POST",
      path: `${this.execPath()}/signal`,
      json: { signal },
    });
  }

  /** Writes to the command's stdin. */
  async writeStdin(data: string | Uint8Array, options: RequestOptions = {}): Promise<void> {
    await this.http.empty({ ...options, method: "POST", path: `${this.execPath()}/stdin`, body: data });
  }

  /** Closes the command's stdin (it then reads end-of-file). */
  async closeStdin(options: RequestOptions = {}): Promise<void> {
    await this.http.empty({
      ...options,
      method: "POST",
      path: `${this.execPath()}/stdin`,
      query: { close: "true" },
      body: new Uint8Array(0),
    });
  }

  /** Drops the connection, which kills the command if it still runs. Idempotent. */
  async close(): Promise<void> {
    this.finish(new SandtreeSdkError("EXEC_CLOSED", "the exec was closed by the client; its process was killed"));
    await this.reader.cancel().catch(() => {});
  }

  /** Internal: reads until the `started` event (or the end), so exec() can report early failures. */
  async started(): Promise<void> {
    await this.until(() => this._execId !== undefined);
    if (this._execId === undefined && this.exit === undefined) {
      throw this.failure ?? new InvalidResponseError("the exec stream ended before the command started");
    }
  }

  private execPath(): string {
    if (this._execId === undefined) {
      throw new SandtreeSdkError("EXEC_NOT_STARTED", "this exec has no id (it never started or already ended)");
    }
    return `/v1/sandboxes/${encodeURIComponent(this.sandboxId)}/execs/${encodeURIComponent(this._execId)}`;
  }

  private attach(ch: Channel, name: string): void {
    if (ch.attached) {
      throw new SandtreeSdkError("ALREADY_ITERATING", `${name} is already being iterated; iterate it once at a time`);
    }
    ch.attached = true;
  }

  private async *iterate(ch: Channel, name: string): AsyncGenerator<Uint8Array, void, undefined> {
    this.attach(ch, name);
    try {
      for (;;) {
        await this.until(() => ch.chunks.length > 0);
        if (ch.chunks.length === 0) {
          if (this.exit === undefined && this.failure !== undefined) throw this.failure;
          return;
        }
        yield this.take(ch);
      }
    } finally {
      ch.attached = false;
      this.notify();
    }
  }

  private take(ch: Channel): Uint8Array {
    const chunk = ch.chunks.shift() as Chunk;
    ch.bytes -= chunk.data.length;
    this.notify();
    return chunk.data;
  }

  /** Reads from the server until `ready()` holds or the stream ended. */
  private async until(ready: () => boolean): Promise<void> {
    while (!ready() && !this.ended) {
      if (this.mayRead()) {
        this.reading ??= this.readOnce().finally(() => {
          this.reading = undefined;
        });
        await this.reading;
      } else {
        await this.wake.promise;
      }
    }
  }

  /** False while an iterated stream holds a full buffer: its consumer must catch up first. */
  private mayRead(): boolean {
    const full = (ch: Channel) => ch.attached && ch.bytes >= HIGH_WATER_MARK;
    return !full(this.out) && !full(this.err);
  }

  private async readOnce(): Promise<void> {
    try {
      const { done, value } = await this.reader.read();
      const events = done ? this.decoder.end() : this.decoder.push(value);
      for (const event of events) {
        if (this.ended) break;
        this.dispatch(event);
      }
      if (done && !this.ended) {
        this.finish(new InvalidResponseError("the exec stream ended without an exit event (connection dropped?)"));
      }
    } catch (err) {
      this.finish(err instanceof SandtreeSdkError ? err : this.mapError(err));
    }
    this.notify();
  }

  private dispatch(event: ExecStreamEvent): void {
    switch (event.type) {
      case "started":
        this._execId = event.exec_id;
        this._pid = event.pid;
        break;
      case "stdout":
      case "stderr":
        this.push(event.type === "stdout" ? this.out : this.err, event.data);
        break;
      case "exit": {
        const { type: _, ...exit } = event;
        this.exit = exit;
        this.finish(undefined);
        // The server closes the stream after `exit`; release it now.
        this.reader.cancel().catch(() => {});
        break;
      }
      case "error":
        this.finish(apiErrorFromCode(event.code, event.message));
        break;
    }
  }

  private push(ch: Channel, data: Uint8Array): void {
    ch.push(data, this.maxBuffered, (keep) => ({ seq: this.seq++, data: keep }));
  }

  private finish(failure: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = failure;
    this.notify();
  }

  private notify(): void {
    const { resolve } = this.wake;
    this.wake = deferred();
    resolve();
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
