import { EventEmitter } from "node:events";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

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
      for (const p of this.pending.values()) p.reject(new Error("QMP connection closed"));
      this.pending.clear();
      this.emit("close");
    });
  }

  static async connect(socketPath: string, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<QmpClient> {
    const signal = AbortSignal.any([AbortSignal.timeout(opts.timeoutMs ?? 30_000), ...(opts.signal ? [opts.signal] : [])]);
    for (;;) {
      signal.throwIfAborted();
      const sock = await new Promise<net.Socket | null>((resolve) => {
        const s = net.connect(socketPath);
        s.once("connect", () => resolve(s));
        s.once("error", () => {
          s.destroy();
          resolve(null);
        });
      });
      if (sock) {
        const client = new QmpClient(sock);
        // A QEMU that accepts but never greets (stopped, hung) must not hold the caller past its deadline.
        let onAbort = () => {};
        try {
          await Promise.race([
            client.execute("qmp_capabilities"),
            new Promise<never>((_, reject) => {
              onAbort = () => reject(new Error("QMP did not greet in time", { cause: signal.reason }));
              if (signal.aborted) onAbort();
              else signal.addEventListener("abort", onAbort, { once: true });
            }),
          ]);
        } catch (err) {
          client.close();
          throw err;
        } finally {
          signal.removeEventListener("abort", onAbort);
        }
        return client;
      }
      await sleep(10, undefined, { signal }).catch(() => {});
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
        p.reject(new Error(`QMP ${e.class ?? "Error"}: ${e.desc ?? "unknown"}`));
      } else p.resolve(msg.return);
    }
  }

  /**
   * Runs one command. With `timeoutMs`, a QEMU that does not answer in time (stopped, hung on
   * I/O) rejects the call instead of leaving it pending forever; a late answer is dropped.
   */
  execute<T = unknown>(command: string, args?: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<T> {
    if (this.closed) return Promise.reject(new Error("QMP connection closed"));
    const id = `q${this.nextId++}`;
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        if (timer) clearTimeout(timer);
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
      if (opts.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          settle();
          reject(new Error(`QMP ${command} did not answer within ${opts.timeoutMs} ms`));
        }, opts.timeoutMs);
        timer.unref();
      }
      this.sock.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`);
    });
  }

  close(): void {
    this.sock.destroy();
  }
}
