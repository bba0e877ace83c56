import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import type net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Flag, FrameType, GuestEmptySchema, GuestHelloSchema, GuestStatSchema, Tag } from "@sandtree/protocol";
import { connectUnix, Deadline, DeadlineError } from "../util/deadline.js";
import { AgentExec } from "./agent-exec.js";
import { listDir, readFileStream, writeFileStream } from "./agent-files.js";
import { BOOT_RETRY, helloPayload, RESTORE_RETRY } from "./agent-hello.js";
import {
  type AgentInfo,
  type ExecSpec,
  guestError,
  parseReply,
  type ReplySchema,
  type StatInfo,
  type StreamHandler,
} from "./agent-types.js";
import { encodeFrame, encodeTlv, type Frame, FrameDecoder, type TlvValue } from "./frame-codec.js";
import { AgentClosedError, AgentProtocolError } from "./guest-error.js";

export { AgentExec, type ExecTransport } from "./agent-exec.js";
export { LIST_MAX_BYTES } from "./agent-files.js";
export type { AgentExecEvent, AgentInfo, ExecSpec, ExitInfo, StatInfo } from "./agent-types.js";

/** A PONG longer than any ping the host sends is not one of its answers. */
const PING_MAX_BYTES = 64;

/**
 * Host side of the guest protocol (docs/protocol.md) over the Unix socket QEMU serves for the
 * sandbox's virtio-serial port. Multiplexes execs and file transfers as streams.
 */
export class AgentClient extends EventEmitter {
  private readonly decoder = new FrameDecoder();
  private readonly streams = new Map<number, StreamHandler>();
  private nextStream = 1;
  private closedError: Error | null = null;
  private helloNonce: Buffer | null = null;
  private onHelloAck: ((info: AgentInfo) => void) | null = null;
  private pings = new Map<string, () => void>();
  info: AgentInfo | null = null;
  /** HELLOs written so far (more than one: an answer came later than the resend, or the port reopened). */
  hellosSent = 0;
  /** eth0's configuration ("ADDR/PREFIX GATEWAY" or "-"), applied by the guest at every HELLO. */
  private net: string | null = null;
  /** How long past its timeout an exec may go on before the host gives up on it (AgentExec.giveUpAfter). @internal */
  execGraceMs = 60_000;
  /** Sent with the HELLO: a guest waiting for its root disk (a template's clone) mounts it, this size. */
  private root: number | null = null;

  private constructor(private readonly sock: net.Socket) {
    super();
    sock.on("data", (chunk: Buffer) => {
      try {
        for (const frame of this.decoder.push(chunk)) {
          if (this.closedError) return;
          this.dispatch(frame);
        }
      } catch (err) {
        // Whatever a frame broke must not reach the event loop (it would end the server).
        this.violate(err);
      }
    });
    sock.on("error", () => {});
    sock.on("close", () => this.fail(new AgentClosedError("agent connection closed")));
  }

  /**
   * Connects (retrying until QEMU serves the socket) and handshakes with a fresh nonce.
   * `beforeHello` runs between the two, connected: a restore loads and runs its guest there, so
   * QEMU's port is already open when the guest's saved state says it was (see QemuVm.start).
   */
  static async connect(
    socketPath: string,
    opts: {
      signal?: AbortSignal;
      timeoutMs?: number;
      net?: string;
      rootBytes?: number;
      beforeHello?: () => Promise<void>;
    } = {},
  ): Promise<AgentClient> {
    // A strongly held deadline (see deadline.ts: AbortSignal.any over AbortSignal.timeout can lose its timer).
    const deadline = new Deadline(opts.timeoutMs ?? 120_000, "the guest agent", opts.signal);
    const signal = deadline.signal;
    try {
      let sock: net.Socket | null = null;
      while (!sock) {
        signal.throwIfAborted();
        sock = await connectUnix(socketPath, signal);
        if (!sock) await sleep(10, undefined, { signal }).catch(() => {});
      }
      const client = new AgentClient(sock);
      client.net = opts.net ?? null;
      client.root = opts.rootBytes ?? null;
      try {
        if (opts.beforeHello) await deadline.race(opts.beforeHello());
        // A restored guest's port was open all along (connected before the load), so its HELLO is
        // not lost, only answered late (~80 ms of CPU under TCG, seconds on a loaded host or under
        // nested KVM), and every HELLO sent is handled in turn before the last one's answer (each
        // a clock set, reseed and network set): resend seldom (a reopened port says READY anyway).
        await deadline.race(client.handshake(signal, opts.beforeHello ? RESTORE_RETRY : BOOT_RETRY));
      } catch (err) {
        client.close();
        throw err;
      }
      return client;
    } finally {
      deadline.clear();
    }
  }

  private async handshake(signal: AbortSignal, retry: { firstMs: number; maxMs: number }): Promise<void> {
    // Resend with a new nonce until answered: a HELLO written before the guest opened its
    // port may be lost, and the byte stream is ordered so older nonces cannot arrive later.
    // A lost HELLO is resent soon (then less often): newer nonces supersede older ones in the
    // ordered byte stream, and no stream exists yet, so resending is harmless.
    let retryMs = retry.firstMs;
    for (;;) {
      signal.throwIfAborted();
      if (this.closedError) throw this.closedError;
      const nonce = randomBytes(16);
      this.helloNonce = nonce;
      const acked = new Promise<AgentInfo>((resolve) => {
        this.onHelloAck = resolve;
      });
      // READY means the agent just opened its port: any HELLO sent before was lost, resend now.
      const ready = new Promise<null>((resolve) => this.once("guest-ready", () => resolve(null)));
      this.sendRaw(FrameType.HELLO, 0, helloPayload(nonce, this.net, this.root));
      this.hellosSent++;
      const info = await Promise.race([acked, ready, sleep(retryMs, null, { signal }).catch(() => null)]);
      retryMs = Math.min(retry.maxMs, retryMs * 2);
      this.removeAllListeners("guest-ready");
      if (info) {
        this.info = info;
        // The answered HELLO's time is as old as its trip into the guest: seconds where a
        // restored guest runs late on a loaded host (a root mount adds more). The guest answers
        // at once now, so set its clock again.
        this.sendRaw(FrameType.SYNC, 0, encodeTlv([[Tag.TIME_NS, { u64: BigInt(Date.now()) * 1_000_000n }]]));
        return;
      }
    }
  }

  private dispatch(frame: Frame): void {
    if (frame.stream === 0) {
      if (frame.type === FrameType.HELLO_ACK && this.helloNonce && frame.payload.length >= 16) {
        if (frame.payload.subarray(0, 16).equals(this.helloNonce)) {
          const info = parseReply(GuestHelloSchema, frame.payload.subarray(16), "HELLO_ACK");
          this.helloNonce = null;
          const cb = this.onHelloAck;
          this.onHelloAck = null;
          cb?.(info);
        }
      } else if (frame.type === FrameType.READY) {
        if (this.helloNonce) this.emit("guest-ready");
      } else if (frame.type === FrameType.PONG && frame.payload.length <= PING_MAX_BYTES) {
        const key = frame.payload.toString("hex");
        const cb = this.pings.get(key);
        this.pings.delete(key);
        cb?.();
      }
      return;
    }
    if (this.helloNonce) return; // not synchronised yet: everything before the ACK is stale
    this.streams.get(frame.stream)?.onFrame(frame);
  }

  private fail(err: Error): void {
    if (this.closedError) return;
    this.closedError = err;
    for (const s of this.streams.values()) s.onClose(err);
    this.streams.clear();
    for (const cb of this.pings.values()) cb();
    this.pings.clear();
    this.emit("close", err);
  }

  /** @internal Closes the connection for good: the guest broke the protocol (a replaced agent). */
  violate(err: unknown): void {
    if (this.closedError) return;
    const e =
      err instanceof AgentProtocolError
        ? err
        : new AgentProtocolError(`a frame broke the host's reader (${err instanceof Error ? err.message : String(err)})`);
    this.sock.destroy();
    this.fail(e);
    this.emit("violation", e.message);
  }

  get isClosed(): boolean {
    return this.closedError !== null;
  }

  close(): void {
    this.sock.destroy();
    this.fail(new AgentClosedError("agent connection closed"));
  }

  /** @internal */
  sendRaw(type: number, stream: number, payload?: Buffer): boolean {
    if (this.closedError) return false;
    return this.sock.write(encodeFrame(type, stream, payload));
  }

  /** @internal Writes a frame and waits for the socket to drain when its buffer is full. */
  async sendData(type: number, stream: number, payload: Buffer): Promise<void> {
    if (this.closedError) throw this.closedError;
    if (!this.sock.write(encodeFrame(type, stream, payload))) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.sock.off("drain", done);
          this.sock.off("close", done);
          resolve();
        };
        this.sock.on("drain", done);
        this.sock.on("close", done);
      });
    }
  }

  /** @internal */
  sendWindow(stream: number, bytes: number): void {
    if (!this.streams.has(stream)) return;
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32LE(bytes, 0);
    this.sendRaw(FrameType.WINDOW, stream, b);
  }

  /** @internal */
  openStream(handler: StreamHandler): number {
    if (this.closedError) throw this.closedError;
    const id = this.nextStream;
    this.nextStream = this.nextStream >= 0x7fffffff ? 1 : this.nextStream + 1;
    this.streams.set(id, handler);
    return id;
  }

  /** @internal */
  endStream(id: number): void {
    this.streams.delete(id);
  }

  /** @internal */
  hasStream(id: number): boolean {
    return this.streams.has(id);
  }

  /** Whether a call is waiting on the guest (an open stream: exec, file, request). */
  get busy(): boolean {
    return this.streams.size > 0;
  }

  /** Round trip through the guest; with `timeoutMs`, rejects with DeadlineError when it is not answered in time. */
  async ping(data: Buffer = randomBytes(8), opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.closedError) throw this.closedError;
    const key = data.toString("hex");
    const p = new Promise<void>((resolve) => this.pings.set(key, resolve));
    this.sendRaw(FrameType.PING, 0, data);
    if (opts.timeoutMs === undefined) await p;
    else {
      const deadline = new Deadline(opts.timeoutMs, "the guest agent's ping");
      try {
        await deadline.race(p);
      } finally {
        deadline.clear();
        this.pings.delete(key);
      }
    }
    if (this.closedError) throw this.closedError;
  }

  exec(spec: ExecSpec): AgentExec {
    const entries: Array<[number, TlvValue]> = [];
    if (spec.shell !== undefined) entries.push([Tag.SHELL, spec.shell]);
    for (const a of spec.argv ?? []) entries.push([Tag.ARG, a]);
    for (const [k, v] of Object.entries(spec.env ?? {})) entries.push([Tag.ENV, `${k}=${v}`]);
    if (spec.cwd !== undefined) entries.push([Tag.CWD, spec.cwd]);
    if (spec.user !== undefined) entries.push([Tag.USER, spec.user]);
    if (spec.timeoutMs !== undefined) entries.push([Tag.TIMEOUT_MS, { u64: Math.ceil(spec.timeoutMs) }]);
    if (spec.pty) {
      entries.push([Tag.FLAGS, { u32: Flag.PTY | Flag.STDIN_OPEN }]);
      entries.push([Tag.ROWS, { u32: spec.pty.rows }], [Tag.COLS, { u32: spec.pty.cols }]);
    } else if (spec.stdin) entries.push([Tag.FLAGS, { u32: Flag.STDIN_OPEN }]);
    const payload = encodeTlv(entries);
    let exec: AgentExec | null = null;
    const id = this.openStream({
      onFrame: (f) => {
        if (exec?.handle(f)) this.endStream(id);
      },
      onClose: (err) => exec?.close(err),
    });
    exec = new AgentExec(this, id);
    this.sendRaw(FrameType.EXEC, id, payload);
    // The stream is dropped (a late EXIT is then ignored) only if it was still open.
    if (spec.timeoutMs !== undefined) exec.giveUpAfter(spec.timeoutMs + this.execGraceMs, () => this.streams.delete(id));
    return exec;
  }

  /**
   * A request answered by one RESULT or ERROR frame. With `timeoutMs` it rejects with
   * DeadlineError when the guest does not answer in time (a late answer is dropped).
   */
  private request<T>(type: number, schema: ReplySchema<T>, entries: Array<[number, TlvValue]>, timeoutMs?: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const id = this.openStream({
        onFrame: (f) => {
          if (f.type === FrameType.RESULT) {
            const value = parseReply(schema, f.payload, `RESULT of frame type ${type}`);
            clearTimeout(timer);
            this.endStream(id);
            resolve(value);
          } else if (f.type === FrameType.ERROR) {
            clearTimeout(timer);
            this.endStream(id);
            reject(guestError(f.payload));
          }
        },
        onClose: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.endStream(id);
          reject(new DeadlineError(`the guest agent (frame type ${type})`, timeoutMs));
        }, timeoutMs);
        timer.unref();
      }
      this.sendRaw(type, id, encodeTlv(entries));
    });
  }

  stat(path: string): Promise<StatInfo> {
    return this.request(FrameType.STAT, GuestStatSchema, [[Tag.PATH, path]]);
  }

  mkdir(path: string, opts: { parents?: boolean; mode?: number } = {}): Promise<void> {
    return this.request(FrameType.MKDIR, GuestEmptySchema, [
      [Tag.PATH, path],
      [Tag.MODE, { u32: opts.mode ?? 0o755 }],
      [Tag.FLAGS, { u32: opts.parents === false ? 0 : Flag.RECURSIVE }],
    ]);
  }

  remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    return this.request(FrameType.REMOVE, GuestEmptySchema, [
      [Tag.PATH, path],
      [Tag.FLAGS, { u32: opts.recursive ? Flag.RECURSIVE : 0 }],
    ]);
  }

  readFile(path: string, opts: { offset?: number; length?: number; signal?: AbortSignal } = {}): AsyncIterable<Buffer> {
    return readFileStream(this, path, opts);
  }

  list(path: string): Promise<StatInfo[]> {
    return listDir(this, path);
  }

  /** Streams `source` into a file in the guest; resolves with the bytes written. */
  writeFile(
    path: string,
    source: AsyncIterable<Uint8Array>,
    opts: { mode?: number; append?: boolean; signal?: AbortSignal } = {},
  ): Promise<{ bytes: number }> {
    return writeFileStream(this, path, source, opts);
  }

  /** Syncs and freezes a filesystem (default `/`); the guest thaws by itself after 10 s. */
  fsfreeze(path = "/", opts: { timeoutMs?: number } = {}): Promise<void> {
    return this.request(FrameType.FSFREEZE, GuestEmptySchema, [[Tag.PATH, path]], opts.timeoutMs);
  }

  fsthaw(path = "/", opts: { timeoutMs?: number } = {}): Promise<void> {
    return this.request(FrameType.FSTHAW, GuestEmptySchema, [[Tag.PATH, path]], opts.timeoutMs);
  }

  /** Sets the guest clock to the host's and reseeds its RNG (after a resume), keeping streams. */
  syncClock(): void {
    this.sendRaw(
      FrameType.SYNC,
      0,
      encodeTlv([
        [Tag.TIME_NS, { u64: BigInt(Date.now()) * 1_000_000n }],
        [Tag.ENTROPY, randomBytes(64)],
      ]),
    );
  }

  /** Asks the guest to sync, stop its processes and power off. */
  shutdown(): void {
    this.sendRaw(FrameType.SHUTDOWN, 0);
  }
}
