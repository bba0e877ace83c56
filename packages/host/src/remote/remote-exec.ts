import { create } from "@bufbuild/protobuf";
import { FrameType, STREAM_WINDOW_BYTES } from "@sandtree/protocol";
import { AgentExec } from "../agent/agent-exec.js";
import { EmptySchema, type ExecInput, ExecInputSchema, type ExecOutput, PtySchema } from "../gen/sandtree/host/v1/host_pb.js";
import type { AsyncQueue } from "../util/async-queue.js";
import { Credit } from "./credit.js";

/**
 * A command on a remote host: the same handle as one in-process (AgentExec: events, stdin,
 * signals, resize), its frames rebuilt from the worker's stream (the guest protocol's schemas
 * check the STARTED and EXIT records again here). Output is flow-controlled end to end: the
 * events queue hands credit back as it is read, and the worker sends no more than it was given.
 */
export class RemoteExec extends AgentExec {
  private readonly stdinAllowance = new Credit(STREAM_WINDOW_BYTES);

  private readonly inputs: AsyncQueue<ExecInput>;

  constructor(inputs: AsyncQueue<ExecInput>) {
    super(
      {
        sendRaw: () => true,
        sendData: async () => {},
        sendWindow: (_stream, bytes) => inputs.push(create(ExecInputSchema, { input: { case: "window", value: bytes } })),
      },
      1,
    );
    this.inputs = inputs;
  }

  private send(input: ExecInput["input"]): void {
    this.inputs.push(create(ExecInputSchema, { input }));
  }

  /** @internal One message of the worker's stream. */
  take(o: ExecOutput): void {
    const frame = (type: number, payload: Buffer) => this.handle({ type, flags: 0, stream: 1, payload });
    const out = o.output;
    if (out.case === "started") frame(FrameType.STARTED, Buffer.from(JSON.stringify({ pid: out.value })));
    else if (out.case === "stdout") frame(FrameType.STDOUT, Buffer.from(out.value));
    else if (out.case === "stderr") frame(FrameType.STDERR, Buffer.from(out.value));
    else if (out.case === "exit") {
      frame(FrameType.EXIT, Buffer.from(out.value.json));
      this.inputs.end();
    } else if (out.case === "stdinWindow") this.stdinAllowance.add(out.value);
  }

  /** @internal The stream ended with an error, or without an exit. */
  override close(err: Error): void {
    this.stdinAllowance.close();
    this.inputs.end();
    super.close(err);
  }

  override async writeStdin(data: Buffer): Promise<void> {
    for (let off = 0; off < data.length; ) {
      const n = Math.min(64 * 1024, data.length - off);
      if (this.events.isEnded || !(await this.stdinAllowance.take(n))) return;
      this.send({ case: "stdin", value: data.subarray(off, off + n) });
      off += n;
    }
  }

  override closeStdin(): void {
    this.send({ case: "stdinClose", value: create(EmptySchema) });
  }

  override signal(signum: number): void {
    this.send({ case: "signal", value: signum });
  }

  override resize(rows: number, cols: number): void {
    this.send({ case: "resize", value: create(PtySchema, { rows, cols }) });
  }
}
