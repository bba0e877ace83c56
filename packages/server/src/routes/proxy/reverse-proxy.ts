import http, { type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";
import type net from "node:net";
import type { Duplex } from "node:stream";
import type { SandtreeError } from "@sandtree/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Upgrades } from "../upgrades.js";
import { answerHeaders } from "./forward-headers.js";
import { StreamAgent, streamConnection, type UpstreamStream } from "./stream-agent.js";

/** How long a connection to the upstream may take. */
export const CONNECT_TIMEOUT_MS = 10_000;

/** Where a proxied request goes: a sandbox's guest port, or the fleet worker that holds the sandbox. */
export interface Upstream {
  protocol?: "http:" | "https:";
  host: string;
  port: number;
  /** Path and query as sent there. */
  path: string;
  /** From forwardHeaders. */
  headers: OutgoingHttpHeaders;
  /** Connections reused between requests (an upgrade always gets its own); a StreamAgent with `stream`. */
  agent?: http.Agent;
  /** The connection is this stream (a sandbox machine's), not a dial to host:port. */
  stream?: UpstreamStream;
  /** What the caller is told when the upstream cannot be reached (refused, timed out). */
  failure(err: NodeJS.ErrnoException): SandtreeError;
}

/** An upstream named by its URL (`https://worker:8080`), brackets of an IPv6 host taken off. */
export function at(origin: string, rest: Omit<Upstream, "protocol" | "host" | "port">): Upstream {
  const u = new URL(origin);
  const https = u.protocol === "https:";
  const port = u.port === "" ? (https ? 443 : 80) : Number(u.port);
  return { protocol: https ? "https:" : "http:", host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port, ...rest };
}

/** Answered by status (101 for an upgrade taken), with what closes when the exchange ends. */
export type Answered = (status: number, conn: NodeJS.EventEmitter) => void;

function open(
  req: IncomingMessage,
  to: Upstream,
  extra: OutgoingHttpHeaders = {},
  agent: http.Agent | false | undefined = to.agent,
) {
  const request = to.protocol === "https:" ? https.request : http.request;
  // A stream goes through a StreamAgent (kept alive by it), else the request opens it itself:
  // with no agent at all, since `agent: false` makes a fresh Agent, which dials host:port instead.
  const connection = !to.stream
    ? agent !== undefined
      ? { agent }
      : {}
    : agent instanceof StreamAgent
      ? { agent, stream: to.stream }
      : { createConnection: streamConnection(to.stream) };
  return request({
    host: to.host,
    port: to.port,
    method: req.method,
    path: to.path,
    headers: { ...to.headers, ...extra },
    ...connection,
  });
}

/** Rejects with `to.failure` when the connection fails or takes too long. */
function onConnectFailure(out: http.ClientRequest, to: Upstream, reject: (err: Error) => void): void {
  // Kept after the answer too (a later error must not go unhandled); rejecting twice does nothing.
  out.on("error", (err: NodeJS.ErrnoException) => reject(to.failure(err)));
  out.once("socket", (sock: net.Socket) => {
    if (!sock.connecting) return;
    const timer = setTimeout(
      () => out.destroy(Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" })),
      CONNECT_TIMEOUT_MS,
    );
    sock.once("connect", () => clearTimeout(timer));
    sock.once("close", () => clearTimeout(timer));
  });
}

/** Sends the request (its body streamed from the client, neither side buffered) and resolves with the answer. */
export function forward(req: IncomingMessage, to: Upstream): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const out = open(req, to);
    out.once("response", resolve);
    onConnectFailure(out, to, (err) => {
      req.unpipe(out);
      reject(err);
    });
    // The client left before its request was sent: the upstream's side stops too.
    req.once("close", () => {
      if (!req.complete || req.socket?.destroyed) out.destroy();
    });
    // Headers go at once: a client may wait for the answer before sending its body (full duplex).
    out.flushHeaders();
    req.pipe(out);
  });
}

export interface RelayOptions {
  /** Changes the answer's headers before they go (a cookie added). */
  headers?: (h: Record<string, string | string[]>) => void;
  /** Reads the (small, JSON) answer whole and sends what this returns instead. */
  rewrite?: ((body: Buffer) => Buffer) | undefined;
}

/** The upstream's answer as the reply: its status, end-to-end headers and body, streamed. */
export function relay(reply: FastifyReply, res: IncomingMessage, o: RelayOptions = {}): FastifyReply {
  reply.hijack();
  const raw = reply.raw;
  const status = res.statusCode ?? 502;
  const headers = answerHeaders(res.headers);
  o.headers?.(headers);
  // The client left: so does the upstream's answer (a long exec stops streaming).
  raw.once("close", () => {
    if (!raw.writableFinished) res.destroy();
  });
  res.on("error", () => raw.destroy());
  if (reply.request.method === "HEAD" || status === 204 || status === 304) {
    res.resume();
    raw.writeHead(status, headers).end();
    return reply;
  }
  const rewrite = o.rewrite;
  if (rewrite) {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => {
      const body = rewrite(Buffer.concat(chunks));
      raw.writeHead(status, { ...headers, "content-length": String(body.length) }).end(body);
    });
    return reply;
  }
  // The headers go on at once, before any body (a client may wait for them to send its own).
  raw.writeHead(status, headers);
  raw.flushHeaders();
  res.pipe(raw);
  return reply;
}

/**
 * An Upgrade (a WebSocket) through to the upstream: once it answers 101, that answer goes to the
 * client and then raw bytes both ways; a refusal goes back as the upstream sent it. A failure to
 * reach the upstream is thrown (the route's error answer, written on the socket by fastify).
 */
export async function proxyUpgrade(
  req: FastifyRequest,
  reply: FastifyReply,
  upgrades: Upgrades,
  to: Upstream,
  o: { answered?: Answered | undefined; track?: ((sock: Duplex) => void) | undefined } = {},
): Promise<FastifyReply> {
  const answer = await new Promise<
    { upgraded: true; res: IncomingMessage; socket: Duplex; head: Buffer } | { upgraded: false; res: IncomingMessage }
  >((resolve, reject) => {
    const out = open(req.raw, to, { connection: "Upgrade", upgrade: String(req.headers.upgrade) }, false);
    out.once("upgrade", (res, socket, head) => resolve({ upgraded: true, res, socket, head }));
    out.once("response", (res) => resolve({ upgraded: false, res }));
    onConnectFailure(out, to, reject);
    out.end();
  });
  if (!answer.upgraded) {
    o.answered?.(answer.res.statusCode ?? 502, reply.raw);
    return relay(reply, answer.res);
  }
  const { res, socket: upstream, head } = answer;
  const client = upgrades.take(req.raw);
  reply.hijack();
  upstream.on("error", () => upstream.destroy());
  if (!client || client.socket.destroyed) {
    upstream.destroy();
    return reply;
  }
  o.track?.(client.socket);
  o.track?.(upstream);
  writeSwitching(client.socket, res);
  o.answered?.(101, client.socket);
  if (head.length > 0) client.socket.write(head);
  if (client.head.length > 0) upstream.write(client.head);
  for (const sock of [client.socket, upstream]) {
    (sock as net.Socket).setNoDelay?.(true);
    (sock as net.Socket).setTimeout?.(0);
  }
  upstream.pipe(client.socket);
  client.socket.pipe(upstream);
  client.socket.once("close", () => upstream.destroy());
  upstream.once("close", () => client.socket.destroy());
  return reply;
}

/** The upstream's 101 answer, its headers as it sent them, on the client's raw socket. */
function writeSwitching(socket: Duplex, res: IncomingMessage): void {
  const lines = [`HTTP/1.1 101 ${res.statusMessage || "Switching Protocols"}`];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  socket.write(`${lines.join("\r\n")}\r\n\r\n`);
}
