import net from "node:net";
import { ExposedPort, ExposedPortList, Sandbox } from "@sandtree/protocol";
import type { RawData, WebSocket } from "ws";
import { ConnectionError } from "./errors.js";
import type { HttpClient, RequestOptions } from "./http.js";
import { sandboxPath } from "./sandbox-path.js";
import { onRefusedUpgrade } from "./ws-refusal.js";

export interface PortForwardOptions {
  /** Local port to listen on (default 0: any free port, see `PortForward.localPort`). */
  localPort?: number;
  /** Local address to listen on (default 127.0.0.1). */
  host?: string;
  /** Use this port token instead of the API key (the port must then be exposed). */
  token?: string;
  /** Called when one forwarded connection fails (refused by the server, nothing listening, ...). */
  onError?: (err: Error) => void;
}

/** Text frame telling the server our side of the connection ended (TCP half-close). */
const EOF_MESSAGE = '{"type":"eof"}';
/** Stop reading the local socket while this much waits unsent on the WebSocket. */
const HIGH_WATER = 1024 * 1024;

export function exposePort(http: HttpClient, id: string, port: number, options: RequestOptions = {}): Promise<ExposedPort> {
  // Exposing again only rotates the token: a retry ends in the same state, with the token it answered.
  return http.json(ExposedPort, {
    ...options,
    method: "POST",
    path: `${sandboxPath(id)}/ports`,
    json: { port },
    idempotent: true,
  });
}

export function unexposePort(http: HttpClient, id: string, port: number, options: RequestOptions = {}): Promise<void> {
  return http.empty({ ...options, method: "DELETE", path: `${sandboxPath(id)}/ports/${port}` });
}

export async function listPorts(http: HttpClient, id: string, options: RequestOptions = {}): Promise<ExposedPort[]> {
  return (await http.json(ExposedPortList, { ...options, method: "GET", path: `${sandboxPath(id)}/ports` })).ports;
}

/**
 * A local TCP server whose connections each reach the sandbox's port through the server
 * (`/tcp/{id}/{port}`, a WebSocket per connection). Authenticated with the API key (the port
 * need not be exposed), or with a port token.
 */
export class PortForward {
  private readonly sockets = new Set<net.Socket>();
  private closed: Promise<void> | null = null;

  constructor(
    private readonly server: net.Server,
    /** The sandbox and port connections go to. */
    readonly sandboxId: string,
    readonly port: number,
  ) {
    server.on("connection", (sock) => {
      this.sockets.add(sock);
      sock.once("close", () => this.sockets.delete(sock));
    });
  }

  /** The local address listened on. */
  get host(): string {
    const a = this.server.address();
    return typeof a === "object" && a ? a.address : "";
  }

  /** The local port listened on. */
  get localPort(): number {
    const a = this.server.address();
    return typeof a === "object" && a ? a.port : 0;
  }

  /** Stops listening and ends every forwarded connection. */
  close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const sock of this.sockets) sock.destroy();
    });
    return this.closed;
  }
}

export async function portForward(
  http: HttpClient,
  id: string,
  port: number,
  options: PortForwardOptions = {},
): Promise<PortForward> {
  const { WebSocket } = await import("ws");
  // Fail fast on an unknown sandbox (each connection would fail later, one by one).
  if (options.token === undefined) await http.json(Sandbox, { method: "GET", path: sandboxPath(id) });
  const url = http.url(`/tcp/${encodeURIComponent(id)}/${port}`).replace(/^http/, "ws");
  const headers =
    options.token !== undefined ? { "x-sandtree-token": options.token, "user-agent": http.userAgent } : http.authHeaders();
  const server = net.createServer({ allowHalfOpen: true }, (local) => {
    local.pause();
    local.setNoDelay(true);
    const ws = new WebSocket(url, { headers, maxPayload: 16 * 1024 * 1024 });
    let opened = false;
    let failed = false;
    // One error per connection: a refused upgrade also closes the WebSocket, which must not
    // be reported as a second, misleading connection failure.
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      local.destroy();
      ws.terminate();
      options.onError?.(err);
    };
    onRefusedUpgrade(ws, "tunnel", fail);
    ws.on("error", (err) => {
      if (!opened) fail(new ConnectionError(`could not open a tunnel at ${http.apiUrl} (${err.message})`, { cause: err }));
      else local.destroy();
    });
    ws.once("open", () => {
      opened = true;
      if (local.destroyed) {
        ws.close(); // the local client left while the tunnel opened
        return;
      }
      bridge(ws, local);
      local.resume();
    });
    local.on("error", () => ws.terminate());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.localPort ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return new PortForward(server, id, port);
}

/** Bytes both ways with backpressure; our end of input is sent as EOF, the tunnel's close ends our socket. */
function bridge(ws: WebSocket, local: net.Socket): void {
  local.on("data", (chunk: Buffer) => {
    ws.send(chunk, { binary: true }, () => {
      if (local.isPaused() && ws.bufferedAmount < HIGH_WATER) local.resume();
    });
    if (ws.bufferedAmount >= HIGH_WATER) local.pause();
  });
  local.once("end", () => {
    if (ws.readyState === ws.OPEN) ws.send(EOF_MESSAGE);
  });
  local.once("close", () => ws.close());
  ws.on("message", (data: RawData, isBinary: boolean) => {
    if (!isBinary) return;
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (!local.write(buf)) ws.pause();
  });
  local.on("drain", () => {
    if (ws.isPaused) ws.resume();
  });
  ws.once("close", (code) => {
    if (code === 1000) local.end();
    else local.destroy();
  });
}
