import { type PtyClientMessage, type PtyQuery, PtyServerMessage } from "@sandtree/protocol";
import type { RawData, WebSocket } from "ws";
import { apiErrorFromCode, ConnectionError, SandtreeSdkError, TimeoutError } from "./errors.js";
import type { HttpClient, RequestOptions } from "./http.js";
import { UnreadBuffer } from "./unread-buffer.js";
import { onRefusedUpgrade } from "./ws-refusal.js";

/** How the terminal's process ended. */
export interface PtyExit {
  exit_code: number;
  signal: number | null;
}

export interface PtyOptions extends RequestOptions {
  /** Runs under `/bin/sh -c` (default: the image's shell, /bin/bash if present, else /bin/sh). */
  command?: string;
  rows?: number;
  cols?: number;
  cwd?: string;
  user?: string;
  /** Output kept while nobody iterates `output` (default 16 MiB); the rest is dropped. */
  maxBufferedBytes?: number;
}

export type PtySignal = Extract<PtyClientMessage, { type: "signal" }>["signal"];

/** Queued output past which we stop reading the socket while `output` is iterated (backpressure). */
const HIGH_WATER_MARK = 1024 * 1024;

/** Opens `GET /v1/sandboxes/{id}/pty`; resolves once the process runs and the socket is open. */
export async function openPty(http: HttpClient, sandboxPath: string, options: PtyOptions = {}): Promise<PtyHandle> {
  const { WebSocket } = await import("ws");
  const query: PtyQuery = {
    ...(options.command !== undefined ? { command: options.command } : {}),
    ...(options.rows !== undefined ? { rows: options.rows } : {}),
    ...(options.cols !== undefined ? { cols: options.cols } : {}),
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.user !== undefined ? { user: options.user } : {}),
  };
  const url = http.url(`${sandboxPath}/pty`, query as Record<string, string | number>).replace(/^http/, "ws");
  const ws = new WebSocket(url, { headers: http.authHeaders(), maxPayload: 16 * 1024 * 1024 });
  const timeoutMs = options.timeoutMs ?? 60_000;
  const handle = new PtyHandle(ws, options.maxBufferedBytes ?? 16 * 1024 * 1024);
  await new Promise<void>((resolve, reject) => {
    const timer =
      timeoutMs > 0
        ? setTimeout(() => fail(new TimeoutError(`the terminal did not open within ${timeoutMs} ms`, timeoutMs)), timeoutMs)
        : undefined;
    const onAbort = () => fail(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    function fail(err: unknown) {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      ws.terminate();
      reject(err);
    }
    ws.once("open", () => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    // A refusal (401, 404, 409, 400) arrives as a plain HTTP answer with the usual JSON error.
    onRefusedUpgrade(ws, "terminal", fail);
    ws.once("error", (err) =>
      fail(new ConnectionError(`could not open a terminal at ${http.apiUrl} (${err.message})`, { cause: err })),
    );
  });
  return handle;
}

/**
 * An interactive process on a pseudo-terminal in a sandbox. `output` yields the terminal's
 * bytes (its stdout and stderr together); `write` types keystrokes (Ctrl-C is byte 0x03).
 * Closing (or dropping the connection) kills every process of the terminal's session.
 */
export class PtyHandle {
  private readonly buf = new UnreadBuffer<Uint8Array>();
  private exit: PtyExit | undefined;
  private failure: unknown;
  private closed = false;
  private readonly done: Promise<void>;

  constructor(
    private readonly ws: WebSocket,
    private readonly maxBuffered: number,
  ) {
    this.done = new Promise<void>((resolve) => {
      ws.on("close", (code, reason) => {
        this.closed = true;
        if (!this.exit && this.failure === undefined) {
          this.failure = new SandtreeSdkError(
            "PTY_CLOSED",
            `the terminal connection closed before the process exited (${code}${reason.length ? ` ${reason}` : ""})`,
          );
        }
        this.notify();
        resolve();
      });
    });
    ws.on("error", (err) => {
      this.failure ??= new ConnectionError(`the terminal connection failed (${err.message})`, { cause: err });
    });
    ws.on("message", (data: RawData, isBinary: boolean) => this.onMessage(data, isBinary));
  }

  /** Output bytes dropped because nobody iterated `output` and its buffer was full. */
  get droppedBytes(): number {
    return this.buf.dropped;
  }

  /** The terminal's output until the process exits; one iteration at a time. */
  get output(): AsyncIterable<Uint8Array> {
    return { [Symbol.asyncIterator]: () => this.iterate() };
  }

  /** Sends keystrokes (a string is sent as UTF-8). */
  write(data: string | Uint8Array): Promise<void> {
    return this.sendRaw(typeof data === "string" ? Buffer.from(data, "utf8") : data, true);
  }

  /** Sets the terminal's size; its foreground program gets SIGWINCH. */
  resize(rows: number, cols: number): Promise<void> {
    return this.control({ type: "resize", rows, cols });
  }

  /** Signals the terminal's foreground process group; SIGKILL ends the whole session. */
  kill(signal: PtySignal = "SIGKILL"): Promise<void> {
    return this.control({ type: "signal", signal });
  }

  /** Types the end-of-file character (^D), as a terminal does for a program reading its input. */
  eof(): Promise<void> {
    return this.control({ type: "eof" });
  }

  /** Resolves when the process exits; rejects if the connection ends first. */
  async wait(): Promise<PtyExit> {
    while (!this.exit && !this.closed) await new Promise<void>((r) => this.wait1(r));
    if (this.exit) return this.exit;
    throw this.failure;
  }

  /** Closes the connection, which kills the process if it still runs. Idempotent. */
  async close(): Promise<void> {
    if (!this.closed) this.ws.close(1000, "closed by the client");
    await this.done;
  }

  private control(msg: PtyClientMessage): Promise<void> {
    return this.sendRaw(JSON.stringify(msg), false);
  }

  private sendRaw(data: Uint8Array | string, binary: boolean): Promise<void> {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) {
      return Promise.reject(this.failure ?? new SandtreeSdkError("PTY_CLOSED", "the terminal is closed"));
    }
    return new Promise((resolve, reject) => this.ws.send(data, { binary }, (err) => (err ? reject(err) : resolve())));
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (isBinary) {
      this.push(buf);
    } else {
      let msg: PtyServerMessage;
      try {
        msg = PtyServerMessage.parse(JSON.parse(buf.toString("utf8")));
      } catch {
        return; // a newer server's message: ignore
      }
      if (msg.type === "exit") this.exit = { exit_code: msg.exit_code, signal: msg.signal };
      else this.failure = apiErrorFromCode(msg.code, msg.message);
    }
    this.notify();
  }

  private push(data: Uint8Array): void {
    const kept = this.buf.push(data, this.maxBuffered, (keep) => keep);
    if (kept && this.buf.attached && this.buf.bytes >= HIGH_WATER_MARK) this.ws.pause();
  }

  private async *iterate(): AsyncGenerator<Uint8Array, void, undefined> {
    if (this.buf.attached) throw new SandtreeSdkError("ALREADY_ITERATING", "output is already being iterated");
    this.buf.attached = true;
    try {
      for (;;) {
        const chunk = this.buf.chunks.shift();
        if (chunk) {
          this.buf.bytes -= chunk.length;
          if (this.buf.bytes < HIGH_WATER_MARK && this.ws.isPaused) this.ws.resume();
          yield chunk;
          continue;
        }
        if (this.exit || this.closed) {
          if (!this.exit && this.failure !== undefined) throw this.failure;
          return;
        }
        await new Promise<void>((r) => this.wait1(r));
      }
    } finally {
      this.buf.attached = false;
      if (this.ws.isPaused) this.ws.resume();
    }
  }

  private waiters: Array<() => void> = [];
  private wait1(r: () => void): void {
    this.waiters.push(r);
  }

  private notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
