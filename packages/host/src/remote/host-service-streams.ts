import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { STREAM_WINDOW_BYTES } from "@sandtree/protocol";
import {
  EmptySchema,
  ExecExitSchema,
  type ExecInput,
  type ExecOutput,
  ExecOutputSchema,
  type MachineEvent,
  MachineEventSchema,
  type MachineHostService,
  type WriteFileInput,
} from "../gen/sandtree/host/v1/host_pb.js";
import type { Machine, MachineExec } from "../machine/machine.js";
import { AsyncQueue } from "../util/async-queue.js";
import { Credit } from "./credit.js";
import { fileOf, rangeOf } from "./file-msgs.js";
import { headedUpload } from "./headed-upload.js";
import type { ServedMachines } from "./host-service.js";
import { machineInfo } from "./host-service.js";
import { serveConnect } from "./host-service-connect.js";
import { answer, toConnectError } from "./remote-errors.js";
import { execSpec, exitMsg } from "./remote-specs.js";

const CHUNK = 64 * 1024;

type Streams = Pick<
  ServiceImpl<typeof MachineHostService>,
  "watch" | "exec" | "connect" | "readFile" | "writeFile" | "stat" | "list" | "mkdir" | "remove"
>;

async function* rethrown<T>(gen: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* gen;
  } catch (err) {
    throw toConnectError(err);
  }
}

/** A machine's events from now until it exits (the first message: the machine as it is). */
async function* watch(m: Machine, ctx: HandlerContext): AsyncIterable<MachineEvent> {
  const q = new AsyncQueue<MachineEvent>();
  const ev = (e: MachineEvent["event"]) => q.push(create(MachineEventSchema, { event: e }));
  ev({ case: "state", value: machineInfo(m) });
  const onExit = (exit: Parameters<Parameters<Machine["once"]>[1]>[0]) => {
    ev({ case: "exit", value: exitMsg(exit) });
    q.end();
  };
  const reason = (c: "unresponsive" | "protocolViolation" | "diskError") => (why: string) => ev({ case: c, value: why });
  const unresponsive = reason("unresponsive");
  const violation = reason("protocolViolation");
  const diskError = reason("diskError");
  const cleared = () => ev({ case: "diskErrorCleared", value: create(EmptySchema) });
  const onAbort = () => q.end();
  if (m.exit) onExit(m.exit);
  else m.once("exit", onExit);
  m.on("unresponsive", unresponsive)
    .on("protocol-violation", violation)
    .on("disk-error", diskError)
    .on("disk-error-cleared", cleared);
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  try {
    yield* q;
  } finally {
    const e = m as unknown as NodeJS.EventEmitter;
    e.off("exit", onExit).off("unresponsive", unresponsive).off("protocol-violation", violation);
    e.off("disk-error", diskError).off("disk-error-cleared", cleared);
    ctx.signal.removeEventListener("abort", onAbort);
  }
}

/** Feeds the client's inputs to the command: stdin (answered with the window it freed), signals, resizes, credit. */
async function pumpInputs(
  it: AsyncIterator<ExecInput>,
  x: MachineExec,
  out: AsyncQueue<ExecOutput>,
  credit: Credit,
): Promise<void> {
  for (;;) {
    const { value, done } = await it.next();
    if (done) return;
    const i = value.input;
    if (i.case === "stdin") {
      await x.writeStdin(Buffer.from(i.value));
      out.push(create(ExecOutputSchema, { output: { case: "stdinWindow", value: i.value.length } }));
    } else if (i.case === "stdinClose") x.closeStdin();
    else if (i.case === "signal") x.signal(i.value);
    else if (i.case === "resize") x.resize(i.value.rows, i.value.cols);
    else if (i.case === "window") credit.add(i.value);
  }
}

/** The command's events to the client, each output chunk within the credit the client granted. */
async function pumpEvents(x: MachineExec, out: AsyncQueue<ExecOutput>, credit: Credit): Promise<void> {
  const o = (output: ExecOutput["output"]) => out.push(create(ExecOutputSchema, { output }));
  for await (const e of x.events) {
    if (e.type === "started") o({ case: "started", value: e.pid });
    else if (e.type === "exit") o({ case: "exit", value: create(ExecExitSchema, { json: JSON.stringify(e.info) }) });
    else {
      // In pieces no larger than a credit grant, so a large chunk cannot wait for more than the window.
      for (let off = 0; off < e.data.length; off += CHUNK) {
        const piece = e.data.subarray(off, off + CHUNK);
        if (!(await credit.take(piece.length))) return;
        o({ case: e.type, value: piece });
      }
    }
  }
}

async function* exec(served: ServedMachines, inputs: AsyncIterable<ExecInput>, ctx: HandlerContext): AsyncIterable<ExecOutput> {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "spec") throw toConnectError(new Error("an exec's first message is its spec"));
  const spec = first.value.input.value;
  const x = served.get(spec.machine).exec(execSpec(spec));
  const out = new AsyncQueue<ExecOutput>();
  const credit = new Credit(STREAM_WINDOW_BYTES);
  // A client gone before the command ended takes it along (nobody could read or stop it any more).
  const onAbort = () => {
    credit.close();
    x.signal(9);
  };
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  pumpInputs(it, x, out, credit).catch(() => {});
  pumpEvents(x, out, credit).then(
    () => out.end(),
    (err: unknown) => out.fail(toConnectError(err)),
  );
  try {
    yield* out;
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    credit.close();
  }
}

async function writeFile(served: ServedMachines, inputs: AsyncIterable<WriteFileInput>, ctx: HandlerContext) {
  const { header: h, data } = await headedUpload(inputs, "a file write");
  try {
    const r = await served.get(h.machine).writeFile(h.path, data, {
      ...(h.mode !== undefined ? { mode: h.mode } : {}),
      append: h.append,
      signal: ctx.signal,
    });
    return { bytes: BigInt(r.bytes) };
  } catch (err) {
    throw toConnectError(err);
  }
}

/** The streaming calls of the service, and the file calls beside them. */
export function hostStreams(served: ServedMachines): Streams {
  return {
    watch: (r, ctx) =>
      rethrown(
        (async function* () {
          yield* watch(served.find(r.name), ctx);
        })(),
      ),
    exec: (inputs, ctx) => rethrown(exec(served, inputs, ctx)),
    connect: (inputs, ctx) => serveConnect(served, inputs, ctx),
    readFile: (r, ctx) =>
      rethrown(
        (async function* () {
          const f = fileOf(r.file, "file");
          const opts = { ...rangeOf(f), signal: ctx.signal };
          for await (const data of served.get(r.machine).readFile(f.path, opts)) yield { data };
        })(),
      ),
    writeFile: (inputs, ctx) => writeFile(served, inputs, ctx),
    stat: (r) => answer(async () => ({ json: JSON.stringify(await served.get(r.machine).stat(r.path)) })),
    list: (r) =>
      answer(async () => ({ entries: (await served.get(r.machine).list(r.path)).map((s) => ({ json: JSON.stringify(s) })) })),
    mkdir: (r) =>
      answer(async () => {
        const d = fileOf(r.dir, "dir");
        await served.get(r.machine).mkdir(d.path, { parents: d.parents, ...(d.mode !== undefined ? { mode: d.mode } : {}) });
        return {};
      }),
    remove: (r) =>
      answer(async () => {
        const f = fileOf(r.file, "file");
        await served.get(r.machine).remove(f.path, { recursive: f.recursive });
        return {};
      }),
  };
}
