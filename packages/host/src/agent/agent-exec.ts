import { FrameType, GuestExitSchema, GuestStartedSchema, STREAM_WINDOW_BYTES, Tag } from "@sandtree/protocol";
import { DeadlineError } from "../util/deadline.js";
import { type AgentExecEvent, type ExitInfo, FILE_CHUNK, guestError, parseReply } from "./agent-types.js";
import { CreditQueue } from "./credit-queue.js";
import { encodeTlv, type Frame } from "./frame-codec.js";
import { AgentProtocolError } from "./guest-error.js";

/** What an exec needs of its connection: frames out and credit back. */
export interface ExecTransport {
  sendRaw(type: number, stream: number, payload?: Buffer): boolean;
  sendData(type: number, stream: number, payload: Buffer): Promise<void>;
  sendWindow(stream: number, bytes: number): void;
}

/** One running process in the guest: events as an async iterable, stdin, signals. */
export class AgentExec {
  readonly events: CreditQueue<AgentExecEvent>;
  private stdinCredit = STREAM_WINDOW_BYTES;
  private creditWaiter: (() => void) | null = null;
  readonly exited: Promise<ExitInfo>;
  private resolveExit!: (info: ExitInfo) => void;
  private rejectExit!: (err: Error) => void;

  constructor(
    private readonly client: ExecTransport,
    readonly stream: number,
  ) {
    this.events = new CreditQueue<AgentExecEvent>((n) => client.sendWindow(stream, n), { what: () => `exec stream ${stream}` });
    this.exited = new Promise<ExitInfo>((resolve, reject) => {
      this.resolveExit = resolve;
      this.rejectExit = reject;
    });
    this.exited.catch(() => {});
  }

  /** @internal */
  handle(frame: Frame): boolean {
    switch (frame.type) {
      case FrameType.STARTED:
        this.events.push({ type: "started", pid: parseReply(GuestStartedSchema, frame.payload, "STARTED").pid });
        return false;
      case FrameType.STDOUT:
        this.events.push({ type: "stdout", data: frame.payload }, frame.payload.length);
        return false;
      case FrameType.STDERR:
        this.events.push({ type: "stderr", data: frame.payload }, frame.payload.length);
        return false;
      case FrameType.WINDOW:
        if (frame.payload.length !== 4) throw new AgentProtocolError(`a WINDOW of ${frame.payload.length} bytes`);
        this.stdinCredit += frame.payload.readUInt32LE(0);
        this.creditWaiter?.();
        this.creditWaiter = null;
        return false;
      case FrameType.EXIT: {
        const info = parseReply(GuestExitSchema, frame.payload, "EXIT");
        this.events.push({ type: "exit", info });
        this.events.end();
        this.resolveExit(info);
        return true;
      }
      case FrameType.ERROR: {
        const err = guestError(frame.payload);
        this.events.fail(err);
        this.rejectExit(err);
        return true;
      }
      default:
        return false;
    }
  }

  /**
   * @internal The guest enforces an exec's timeout; a guest that answers pings but never ends the
   * exec (a replaced agent) would hold the call forever. After `ms`, if `drop()` says the stream
   * was still open (and drops it), the process group gets SIGKILL and the exec fails.
   */
  giveUpAfter(ms: number, drop: () => boolean): void {
    const timer = setTimeout(() => {
      if (!drop()) return;
      this.signal(9);
      this.close(new DeadlineError("the guest's exec (past its timeout)", ms));
    }, ms);
    timer.unref();
    this.exited.then(
      () => clearTimeout(timer),
      () => clearTimeout(timer),
    );
  }

  /** @internal */
  close(err: Error): void {
    this.events.fail(err);
    this.rejectExit(err);
    this.creditWaiter?.();
  }

  async writeStdin(data: Buffer): Promise<void> {
    let off = 0;
    while (off < data.length) {
      while (this.stdinCredit <= 0) {
        if (this.events.isEnded) return;
        await new Promise<void>((r) => {
          this.creditWaiter = r;
        });
      }
      const n = Math.min(this.stdinCredit, FILE_CHUNK, data.length - off);
      this.stdinCredit -= n;
      await this.client.sendData(FrameType.STDIN, this.stream, data.subarray(off, off + n));
      off += n;
    }
  }

  closeStdin(): void {
    this.client.sendRaw(FrameType.STDIN_CLOSE, this.stream);
  }

  signal(signum: number): void {
    this.client.sendRaw(FrameType.SIGNAL, this.stream, encodeTlv([[Tag.SIGNUM, { u32: signum }]]));
  }

  /** Sets the window size of a pty exec (its foreground process group gets SIGWINCH). */
  resize(rows: number, cols: number): void {
    this.client.sendRaw(
      FrameType.RESIZE,
      this.stream,
      encodeTlv([
        [Tag.ROWS, { u32: rows }],
        [Tag.COLS, { u32: cols }],
      ]),
    );
  }
}
