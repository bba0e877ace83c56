import { Duplex } from "node:stream";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type ConnectInput,
  ConnectInputSchema,
  type ConnectOutput,
  ConnectTargetSchema,
  EmptySchema,
  type MachineHostService,
} from "../gen/sandtree/host/v1/host_pb.js";
import { MachinePortError } from "../machine/machine.js";
import { fromConnectError } from "./remote-errors.js";

type Pending = { chunk: Buffer; cb: (err?: Error | null) => void };

/**
 * A connection to a port of a machine on a remote host, over the worker's Connect stream, as a
 * Duplex. Flow control end to end: a write's callback comes once the transport took it (the next
 * message waits for that), and the worker's messages are read only as fast as the Duplex is read.
 * The guest's end ends the readable side (and, as a net.Socket by default, the writable);
 * `end()` half-closes; `destroy()` cancels the call (the worker closes the guest connection).
 */
export async function remoteConnect(
  client: Client<typeof MachineHostService>,
  machine: string,
  port: number,
  opts: { signal?: AbortSignal | undefined; life: AbortSignal },
): Promise<Duplex> {
  opts.signal?.throwIfAborted();
  const call = new AbortController();
  const onLife = () => call.abort(opts.life.reason);
  opts.life.addEventListener("abort", onLife, { once: true });
  const onAbort = () => call.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  let pending: Pending | null = null;
  let finished = false;
  let wake: (() => void) | null = null;
  const nudge = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const input = (i: ConnectInput["input"]) => create(ConnectInputSchema, { input: i });
  async function* inputs(): AsyncIterable<ConnectInput> {
    yield input({ case: "target", value: create(ConnectTargetSchema, { machine, port }) });
    for (;;) {
      while (!pending && !finished) await new Promise<void>((r) => (wake = r));
      const p = pending;
      pending = null;
      if (!p) break;
      yield input({ case: "data", value: p.chunk });
      // Resumed once the transport wrote the message: the writer may go on.
      p.cb();
    }
    yield input({ case: "end", value: create(EmptySchema) });
  }
  const outputs = client.connect(inputs(), { signal: call.signal })[Symbol.asyncIterator]();
  const what = `connecting to port ${port} of ${machine}`;
  let first: IteratorResult<ConnectOutput>;
  try {
    first = await outputs.next();
  } catch (err) {
    finished = true;
    nudge();
    opts.life.removeEventListener("abort", onLife);
    if (opts.signal?.aborted) throw opts.signal.reason;
    throw fromConnectError(err, what);
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
  }
  if (first.done || first.value.output.case !== "connected") {
    call.abort();
    throw new MachinePortError(`${what}: the worker ended the call before connecting`, port, false, "EPROTO");
  }

  // Reads the worker's messages while the Duplex wants more: a read() that comes while one is
  // pending (a push may call it synchronously) is remembered, never dropped.
  let pumping = false;
  let wanted = false;
  const pump = async () => {
    pumping = true;
    try {
      while (wanted) {
        wanted = false;
        const r = await outputs.next();
        if (r.done) {
          duplex.push(null);
          return;
        }
        const o = r.value.output;
        if (o.case === "data") {
          if (duplex.push(Buffer.from(o.value))) wanted = true;
        } else {
          // The guest's end: read on to the call's end (the worker's close, or its error).
          if (o.case === "end") duplex.push(null);
          wanted = true;
        }
      }
    } catch (err) {
      duplex.destroy(fromConnectError(err, `the connection to port ${port} of ${machine}`));
    } finally {
      pumping = false;
    }
  };
  const duplex = new Duplex({
    allowHalfOpen: false,
    read() {
      wanted = true;
      if (!pumping) void pump();
    },
    write(chunk: Buffer, _enc, cb) {
      pending = { chunk, cb };
      nudge();
    },
    final(cb) {
      finished = true;
      nudge();
      cb();
    },
    destroy(err, cb) {
      opts.life.removeEventListener("abort", onLife);
      const p = pending;
      pending = null;
      finished = true;
      nudge();
      p?.cb(err ?? new Error("the connection was closed"));
      call.abort();
      cb(err);
    },
  });
  return duplex;
}
