import { EventEmitter } from "node:events";
import type net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { connectUnix, Deadline } from "../util/deadline.js";

/** What every command waits at most unless the caller says otherwise. */
export const QMP_DEFAULT_TIMEOUT_MS = 30_000;

/** QEMU did not answer a command in time (stopped, hung): its main loop is not serving QMP. */
export class QmpTimeoutError extends Error {
  override readonly name = "QmpTimeoutError";
}

/** QEMU's control connection closed (QEMU exited, or was killed) before it answered. */
export class QmpClosedError extends Error {
  override readonly name = "QmpClosedError";
  constructor() {
    super("QMP connection closed");
  }
}

/** QEMU answered a command with an error; the message keeps QEMU's `QMP <class>: <desc>` form. */
export class QmpCommandError extends Error {
  override readonly name = "QmpCommandError";
  constructor(
    readonly qmpClass: string,
    desc: string,
  ) {
    super(`QMP ${qmpClass}: ${desc}`);
  }
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/** A QMP client: JSON lines over QEMU's Unix socket, with capability negotiation. */
export class QmpClient extends EventEmitter {
  private buf = "";
  private nextId = 1;
  private pending = new Map<string, Pending>();
  private closed = false;

  private constructor(private readonly sock: net.Socket) {
    super();
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => this.onData(d));
    sock.on("error", () => {});
    sock.on("close", () => {
      this.closed = true;
      for (const p of this.pending.values()) p.reject(new QmpClosedError());
      this.pending.clear();
      this.emit("close");
    });
  }

  static async connect(socketPath: string, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<QmpClient> {
    // A strongly held deadline (see deadline.ts: AbortSignal.any over AbortSignal.timeout can lose its timer).
    const deadline = new Deadline(opts.timeoutMs ?? 30_000, "QMP", opts.signal);
    const signal = deadline.signal;
    try {
      for (;;) {
        signal.throwIfAborted();
        const sock = await connectUnix(socketPath, signal);
        if (sock) {
          const client = new QmpClient(sock);
          // A QEMU that accepts but never greets (stopped, hung) must not hold the caller past its deadline.
          try {
            await client.execute("qmp_capabilities", undefined, { signal });
          } catch (err) {
            client.close();
            throw signal.aborted ? new QmpTimeoutError("QMP did not greet in time", { cause: signal.reason }) : err;
          }
          return client;
        }
        await sleep(10, undefined, { signal }).catch(() => {});
      }
    } finally {
      deadline.clear();
    }
  }

  private onData(d: string): void {
    this.buf += d;
    let nl = this.buf.indexOf("\n");
    while (nl >= 0) {
      const line = this.buf.slice(0, nl).trim();
      this.buf = this.buf.slice(nl + 1);
      nl = this.buf.indexOf("\n");
      if (!line) continue;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      if ("event" in msg) {
        this.emit("event", msg);
        continue;
      }
      const id = typeof msg.id === "string" ? msg.id : undefined;
      const p = id ? this.pending.get(id) : undefined;
      if (!p || !id) continue;
      this.pending.delete(id);
      if ("error" in msg) {
        const e = msg.error as { class?: string; desc?: string };
        p.reject(new QmpCommandError(e.class ?? "Error", e.desc ?? "unknown"));
      } else p.resolve(msg.return);
    }
  }

  /**
   * Runs one command. Every command has a deadline (`timeoutMs`, default QMP_DEFAULT_TIMEOUT_MS;
   * `signal` ends it sooner): a QEMU that does not answer in time (stopped, hung on I/O) rejects
   * the call with QmpTimeoutError instead of leaving it pending forever; a late answer is dropped.
   */
  execute<T = unknown>(
    command: string,
    args?: Record<string, unknown>,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    if (this.closed) return Promise.reject(new QmpClosedError());
    if (opts.signal?.aborted) return Promise.reject(new QmpTimeoutError(`QMP ${command} was not sent: its deadline had passed`));
    const id = `q${this.nextId++}`;
    const timeoutMs = opts.timeoutMs ?? QMP_DEFAULT_TIMEOUT_MS;
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => {
        settle();
        reject(new QmpTimeoutError(`QMP ${command} did not answer in time`, { cause: opts.signal?.reason }));
      };
      const settle = () => {
        if (timer) clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        this.pending.delete(id);
      };
      this.pending.set(id, {
        resolve: (v) => {
          settle();
          resolve(v as T);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
      });
      // Unref'd but strongly held by the timer list: it fires; it just keeps no process alive by itself.
      timer = setTimeout(() => {
        settle();
        reject(new QmpTimeoutError(`QMP ${command} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.sock.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`);
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.sock.destroy();
  }
}
