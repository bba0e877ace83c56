import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";

/** A connection an upstream is reached over that is opened, not dialed (a sandbox machine's stream to a guest port). */
export interface UpstreamStream {
  /** Names the upstream: kept-alive connections are reused only for the same key. */
  key: string;
  open(): Promise<Duplex>;
}

type Opens = http.ClientRequestArgs & { stream?: UpstreamStream };
type Created = (err: Error | null, stream: Duplex) => void;
type SocketParts = Partial<Pick<net.Socket, "setKeepAlive" | "setNoDelay" | "setTimeout" | "ref" | "unref">>;

/** The few net.Socket members http's client and Agent call, as no-ops on a stream that has none. */
function socketLike(d: Duplex): Duplex {
  const s = d as Duplex & SocketParts;
  s.setKeepAlive ??= () => s as unknown as net.Socket;
  s.setNoDelay ??= () => s as unknown as net.Socket;
  s.setTimeout ??= () => s as unknown as net.Socket;
  s.ref ??= () => s as unknown as net.Socket;
  s.unref ??= () => s as unknown as net.Socket;
  return s;
}

/** A client request's `createConnection` for a stream (an upgrade, which takes no agent). */
export function streamConnection(stream: UpstreamStream): NonNullable<http.ClientRequestArgs["createConnection"]> {
  return (_options, created) => {
    stream.open().then(
      (d) => created(null, socketLike(d)),
      (err: Error) => created(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
}

/** An http.Agent that keeps streams alive between requests of the same upstream stream, as it keeps sockets. */
export class StreamAgent extends http.Agent {
  override getName(options: Opens = {}): string {
    return options.stream ? `stream:${options.stream.key}` : super.getName(options);
  }

  override createConnection(options: Opens, created?: Created): Duplex | null | undefined {
    if (!options.stream || !created) return super.createConnection(options, created);
    return streamConnection(options.stream)(options, created);
  }
}
