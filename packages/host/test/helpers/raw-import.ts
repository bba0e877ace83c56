// An ImportLayout call with bytes of the test's choosing (RemoteHost only sends whole layouts):
// the worker's answer to a header and these tar pieces, as the error its host would throw.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { MachineHostService } from "../../src/gen/sandtree/host/v1/host_pb.js";
import { fromConnectError } from "../../src/remote/remote-errors.js";

/** A plain client of a worker's host service, for messages RemoteHost never sends. */
export function rawClient(url: string, key: string) {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "2",
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${key}`);
        return next(req);
      },
    ],
  });
  return createClient(MachineHostService, transport);
}

/** Null when the worker imported it, else the error the caller would see. */
export async function importRaw(url: string, key: string, name: string, pieces: Uint8Array[]): Promise<Error | null> {
  async function* inputs() {
    yield { input: { case: "header" as const, value: { name } } };
    for (const value of pieces) yield { input: { case: "tar" as const, value } };
  }
  return rawClient(url, key)
    .importLayout(inputs())
    .then(
      () => null,
      (e: unknown) => fromConnectError(e, "importing"),
    );
}
