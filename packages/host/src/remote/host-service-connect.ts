import type { Duplex } from "node:stream";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { type ConnectInput, type ConnectOutput, ConnectOutputSchema, EmptySchema } from "../gen/sandtree/host/v1/host_pb.js";
import type { ServedMachines } from "./host-service.js";
import { toConnectError } from "./remote-errors.js";

/** Resolves once the stream can take more, or is gone. */
function drained(sock: Duplex): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sock.off("drain", done).off("close", done);
      resolve();
    };
    sock.on("drain", done).on("close", done);
  });
}

/**
 * The client's bytes to the guest connection, the next message taken only once the connection took
 * the last (HTTP/2's window then holds the client back); the client's end half-closes it.
 */
async function pumpIn(it: AsyncIterator<ConnectInput>, sock: Duplex): Promise<void> {
  for (;;) {
    const { value, done } = await it.next();
    if (done || value.input.case === "end") {
      sock.end();
      return;
    }
    if (value.input.case === "data" && !sock.destroyed && !sock.write(value.input.value)) await drained(sock);
  }
}

const out = (output: ConnectOutput["output"]) => create(ConnectOutputSchema, { output });

/**
 * One connection to a port of a served machine (its own `connect`): `connected`, then what the
 * guest sends (read only as fast as the client's stream takes it), `end` at the guest's end; the
 * call ends once the connection has closed both ways. A client gone closes the connection.
 */
export async function* serveConnect(
  served: ServedMachines,
  inputs: AsyncIterable<ConnectInput>,
  ctx: HandlerContext,
): AsyncIterable<ConnectOutput> {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "target") {
    throw toConnectError(new Error("a connection's first message names its machine and port"));
  }
  const { machine, port } = first.value.input.value;
  let sock: Duplex;
  try {
    sock = await served.get(machine).connect(port, { signal: ctx.signal });
  } catch (err) {
    throw toConnectError(err);
  }
  const closed = new Promise<void>((resolve) => sock.once("close", resolve));
  const onAbort = () => sock.destroy();
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  // Errors reach the reader below; one after it finished (a write's) must not go unhandled.
  sock.on("error", () => {});
  pumpIn(it, sock).catch(() => sock.destroy());
  try {
    yield out({ case: "connected", value: create(EmptySchema) });
    for await (const chunk of sock.iterator({ destroyOnReturn: false })) yield out({ case: "data", value: chunk as Buffer });
    yield out({ case: "end", value: create(EmptySchema) });
    await closed;
  } catch (err) {
    throw toConnectError(err);
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    sock.destroy();
  }
}
