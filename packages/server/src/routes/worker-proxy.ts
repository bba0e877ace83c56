import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Duplex } from "node:stream";
import { type SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { renderError } from "../errors.js";
import type { RemoteHost } from "../services/fleet/fleet-service.js";
import { unreachable } from "../services/fleet/worker-client.js";
import type { Services } from "../services/services.js";
import { upgrades } from "./upgrades.js";
import { countsAsActivity, PORT_MANAGEMENT, PORT_WAYS_IN, rewritePortUrls, wayInAuth } from "./worker-ports.js";

// Calls answered by the control plane itself for a sandbox on a worker: its record (this
// store's row), its deletion (which deletes it on the worker, see RemoteSandboxes.teardown), its
// checkpoints (taken on the worker, recorded here: RemoteCheckpoints), forks (a checkpoint there,
// children placed like any restore), resets (the chain sent there first), pause and resume (done on
// the worker through RemoteSandboxes.control, answered with this record).
const ANSWERED_HERE = new Set([
  "GET /v1/sandboxes/:id",
  "DELETE /v1/sandboxes/:id",
  "GET /v1/sandboxes/:id/checkpoints",
  "POST /v1/sandboxes/:id/checkpoints",
  "POST /v1/sandboxes/:id/fork",
  "POST /v1/sandboxes/:id/reset",
  "POST /v1/sandboxes/:id/pause",
  "POST /v1/sandboxes/:id/resume",
]);
// Hop-by-hop headers, and the caller's key (the worker gets the host's call key instead, or, on
// a port's way in, none: see wayInAuth).
const DROPPED = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "host", "authorization", "te", "trailer"]);

function forwardHeaders(
  h: IncomingHttpHeaders,
  auth: string | null,
  extra: Record<string, string> = {},
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !DROPPED.has(k)) out[k] = v;
  // Browsers send the key as a WebSocket subprotocol (`bearer.<key>`): never forwarded.
  if (typeof out["sec-websocket-protocol"] === "string") {
    const kept = out["sec-websocket-protocol"]
      .split(",")
      .map((p) => p.trim())
      .filter((p) => !p.startsWith("bearer."));
    if (kept.length > 0) out["sec-websocket-protocol"] = kept.join(", ");
    else delete out["sec-websocket-protocol"];
  }
  return { ...out, ...extra, ...(auth === null ? {} : { authorization: auth }) };
}

/** Told the worker's status once it answers, with what closes when the exchange ends. */
type Answered = (status: number, conn: NodeJS.EventEmitter) => void;

function open(host: RemoteHost, req: FastifyRequest, headers: Record<string, string | string[]>) {
  const target = new URL(req.url, host.url);
  const fn = target.protocol === "https:" ? httpsRequest : httpRequest;
  return fn(target, { method: req.method, headers });
}

function sendError(reply: FastifyReply, req: FastifyRequest, err: SandtreeError): void {
  if (reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  const r = renderError(err, String(req.id), req.log);
  reply.raw.writeHead(r.status, { "content-type": "application/json; charset=utf-8", "x-request-id": String(req.id) });
  reply.raw.end(JSON.stringify(r.body));
}

/**
 * Streams the request body to the worker and its answer back, neither buffered; with `rewrite`,
 * the answer (a small JSON one) is read whole and rewritten first.
 */
function pipeHttp(
  req: FastifyRequest,
  reply: FastifyReply,
  host: RemoteHost,
  o: { auth: string | null; rewrite?: ((body: Buffer) => Buffer) | undefined; answered?: Answered | undefined },
): void {
  reply.hijack();
  const up = open(host, req, forwardHeaders(req.headers, o.auth));
  up.on("response", (res: IncomingMessage) => {
    const headers = { ...res.headers };
    delete headers.connection;
    delete headers["keep-alive"];
    o.answered?.(res.statusCode ?? 502, reply.raw);
    const rewrite = o.rewrite;
    if (!rewrite) {
      reply.raw.writeHead(res.statusCode ?? 502, headers);
      res.pipe(reply.raw);
      return;
    }
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => {
      const body = rewrite(Buffer.concat(chunks));
      delete headers["transfer-encoding"];
      if (res.statusCode !== 204) headers["content-length"] = String(body.length);
      reply.raw.writeHead(res.statusCode ?? 502, headers);
      reply.raw.end(res.statusCode === 204 ? undefined : body);
    });
  });
  up.on("error", (err) => sendError(reply, req, unreachable(host, err.message)));
  // The caller went away: so does the call into the worker (a long exec stops streaming).
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) up.destroy();
  });
  req.raw.pipe(up);
}

/** Pipes a WebSocket upgrade (PTY, VNC) to the worker: the 101 answer and then bytes, both ways. */
function pipeUpgrade(
  app: FastifyInstance,
  req: FastifyRequest,
  reply: FastifyReply,
  host: RemoteHost,
  auth: string | null,
  answered?: Answered,
): boolean {
  const client = upgrades(app).take(req.raw);
  if (!client) return false;
  reply.hijack();
  const up = open(host, req, forwardHeaders(req.headers, auth, { connection: "Upgrade", upgrade: String(req.headers.upgrade) }));
  const fail = (err: SandtreeError) => {
    const r = renderError(err, String(req.id), req.log);
    const body = JSON.stringify(r.body);
    client.socket.end(
      `HTTP/1.1 ${r.status} Error\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  };
  up.on("upgrade", (res: IncomingMessage, socket: Duplex, head: Buffer) => {
    let head101 = `HTTP/1.1 101 Switching Protocols\r\n`;
    for (let i = 0; i < res.rawHeaders.length; i += 2) head101 += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
    client.socket.write(`${head101}\r\n`);
    answered?.(101, client.socket);
    if (head.length > 0) client.socket.write(head);
    if (client.head.length > 0) socket.write(client.head);
    socket.pipe(client.socket).pipe(socket);
    socket.on("error", () => client.socket.destroy());
    client.socket.on("error", () => socket.destroy());
    socket.on("close", () => client.socket.destroy());
    client.socket.on("close", () => socket.destroy());
  });
  up.on("response", (res: IncomingMessage) => {
    // Refused by the worker (404, 409, ...): its answer as it is, then the connection closes.
    let text = `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n`;
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      const k = String(res.rawHeaders[i]).toLowerCase();
      // Framing is set below (content-length of the body read whole): never sent twice.
      if (k !== "connection" && k !== "transfer-encoding" && k !== "keep-alive" && k !== "content-length")
        text += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
    }
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => {
      const body = Buffer.concat(chunks);
      client.socket.end(Buffer.concat([Buffer.from(`${text}content-length: ${body.length}\r\nconnection: close\r\n\r\n`), body]));
    });
  });
  up.on("error", (err) => fail(unreachable(host, err.message)));
  up.end();
  return true;
}

/**
 * Fleet mode: every call into a sandbox that runs on a worker goes to that worker, with the
 * host's call key instead of the caller's API key, after this control plane checked the key and
 * that the sandbox is the caller's team's (and counted its activity). Runs as an onRequest hook
 * after authentication, before any body is read, so uploads, downloads and exec output stream.
 */
export function workerProxy(app: FastifyInstance, s: Services): void {
  const remote = s.remote;
  app.addHook("onRequest", async (req, reply) => {
    const route = req.routeOptions.url ?? "";
    if (PORT_WAYS_IN.has(route)) return wayIn(req, reply);
    if (!route.startsWith("/v1/sandboxes/:id") || !req.principal) return;
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== "string") return;
    // Another team's sandbox (or none): the route answers 404 as for any sandbox.
    const sb = await s.sandboxes.get(req.principal.teamId, id).catch(() => null);
    if (!sb) return;
    // An ended sandbox (deleted, ended on its worker, or lost with its host) is answered here
    // from this control plane's record: its worker may be gone.
    if ((TERMINAL_STATUSES as readonly string[]).includes(sb.status)) return;
    const host = await remote.hostOf(id);
    if (!host) return;
    const key = `${req.method} ${route}`;
    if (ANSWERED_HERE.has(key)) return;
    const auth = `Bearer ${host.key}`;
    if (req.headers.upgrade && pipeUpgrade(app, req, reply, host, auth)) return reply;
    // Exposed ports: the worker renders their URLs on its address; the caller gets this one's.
    const rewrite = PORT_MANAGEMENT.has(key) ? (body: Buffer) => rewritePortUrls(req, body) : undefined;
    pipeHttp(req, reply, host, { auth, rewrite });
    return reply;
  });

  /** `/ports/{id}/{port}/...` and `/tcp/{id}/{port}` of a live sandbox on a worker: piped to the worker's same path. */
  async function wayIn(req: FastifyRequest, reply: FastifyReply) {
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== "string") return;
    // Only a live sandbox of this store is looked up (an unknown id is answered by the route: 404).
    const sb = await s.ports.live(id);
    if (!sb) return;
    const host = await remote.hostOf(id);
    if (!host) return;
    const auth = await wayInAuth(req, s, id, host.key);
    const answered = countsAsActivity(s, sb);
    if (req.headers.upgrade && pipeUpgrade(app, req, reply, host, auth, answered)) return reply;
    pipeHttp(req, reply, host, { auth, answered });
    return reply;
  }
}
