import net from "node:net";
import { SandtreeError } from "@sandtree/protocol";
import { guestAddressOf } from "../volumes/guest-mount.js";
import { MachinePortError } from "./machine.js";

/** How long a connection to a guest's port may take. */
export const PORT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * A TCP connection to `host:port` (a guest's address, reached over its tap), resolved once it is
 * connected. `end()` half-closes (the guest's answer still comes); the guest's end ends it (net's
 * default). Failures are MachinePortError (`refused` for ECONNREFUSED); an abort of `signal`
 * rejects with its reason.
 */
export function dialGuestPort(host: string, port: number, opts: { signal?: AbortSignal } = {}): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    opts.signal?.throwIfAborted();
    const sock = net.connect({ host, port });
    const done = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      sock.off("error", onError);
    };
    const onError = (err: NodeJS.ErrnoException) => {
      done();
      sock.destroy();
      const reason = err.code ?? err.message;
      reject(
        new MachinePortError(`connecting to port ${port} of the guest: ${reason}`, port, reason === "ECONNREFUSED", reason, {
          cause: err,
        }),
      );
    };
    const onAbort = () => {
      done();
      sock.destroy();
      reject(opts.signal?.reason);
    };
    const timer = setTimeout(
      () => onError(Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" })),
      PORT_CONNECT_TIMEOUT_MS,
    );
    sock.once("error", onError);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    sock.once("connect", () => {
      done();
      sock.setNoDelay(true);
      resolve(sock);
    });
  });
}

/** The guest's address in a NIC's configuration ("ADDR/PREFIX GATEWAY"), or NETWORK_DISABLED without one. */
export function guestPortAddress(name: string, guestNet: string | undefined): string {
  if (!guestNet || guestNet === "-") {
    const why = guestNet ? "its network is off" : "it has no network interface";
    throw new SandtreeError("NETWORK_DISABLED", `machine ${name} has no network: ${why}`);
  }
  return guestAddressOf(guestNet);
}
