import type { Duplex } from "node:stream";
import { type ExposedPort, ExposePortRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import { z } from "zod";
import { parse } from "../errors.js";
import { type ExposedPortInfo, type PortTarget, portFailure } from "../services/network/port-service.js";
import type { Services } from "../services/services.js";
import { forwardHeaders } from "./proxy/forward-headers.js";
import { forward, proxyUpgrade, relay, type Upstream } from "./proxy/reverse-proxy.js";
import { StreamAgent } from "./proxy/stream-agent.js";
import { upgrades } from "./upgrades.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const PortParams = z.object({ id: z.string().min(1).max(64), port: z.coerce.number().int().min(1).max(65535) });

export const TOKEN_HEADER = "x-sandtree-token";
export const TOKEN_QUERY = "sandtree_token";
export const TOKEN_COOKIE_PREFIX = "sandtree_port_";
/** Text frame a /tcp client sends when its side of the connection ended (half-close). */
export const TCP_EOF_MESSAGE = '{"type":"eof"}';
/** A tunnel stops reading the guest while this much waits unsent on its WebSocket. */
const HIGH_WATER = 1024 * 1024;
/**
 * Exposed ports: management under /v1 (API key), and the ways in, guarded by each port's token
 * instead of an API key (the auth hook only covers /v1):
 * - `/ports/{id}/{port}/...`: HTTP (bodies streamed both ways) and WebSocket upgrades, proxied
 *   to the guest's port over its machine's connection (Machine.connect);
 * - `/tcp/{id}/{port}`: a WebSocket carrying a raw TCP connection (binary frames).
 */
export function portRoutes(app: FastifyInstance, s: Services): void {
  const pending = upgrades(app);
  // Connections to guests are reused between proxied requests (per sandbox and port).
  const agent = new StreamAgent({ keepAlive: true, maxFreeSockets: 16 });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  // Upgraded connections still count for server.close(): end them first, or close would wait forever.
  const open = new Set<Duplex>();
  const keep = (sock: Duplex) => {
    open.add(sock);
    sock.once("close", () => open.delete(sock));
  };
  app.addHook("preClose", async () => {
    for (const sock of open) sock.destroy();
    agent.destroy();
  });

  app.post("/v1/sandboxes/:id/ports", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { port } = parse(ExposePortRequest, req.body ?? {});
    const exposed = await s.ports.expose(req.principal.teamId, id, port);
    return reply.status(201).send(render(req, exposed));
  });

  app.get("/v1/sandboxes/:id/ports", async (req) => {
    const { id } = parse(Params, req.params);
    return { ports: (await s.ports.list(req.principal.teamId, id)).map((p) => render(req, p)) };
  });

  app.delete("/v1/sandboxes/:id/ports/:port", async (req, reply) => {
    const { id, port } = parse(PortParams, req.params);
    await s.ports.unexpose(req.principal.teamId, id, port);
    return reply.status(204).send();
  });

  // Proxied bodies are the guest's business: no parsing, no size limit, streamed through.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_req, _payload, done) => done(null));

    // Relative links in a proxied page need the trailing slash.
    scope.all("/ports/:id/:port", async (req, reply) => {
      const [pathname, query] = splitUrl(req.url);
      return reply.redirect(`${pathname}/${query === null ? "" : `?${query}`}`, 308);
    });

    scope.all("/ports/:id/:port/*", async (req, reply) => {
      const { id, port } = parse(PortParams, req.params);
      const { token, from } = tokenOf(req, port);
      const target = await s.ports.authorize(id, port, token);
      const to = guest(req, target, () => s.ports.open(target));
      if (pending.get(req.raw)) {
        // Upgraded connections keep the sandbox active while they last.
        const answered = (status: number, conn: NodeJS.EventEmitter) => {
          if (status === 101) conn.once("close", s.timeouts.beginSoon(target.sandbox.team_id, id));
        };
        return proxyUpgrade(req, reply, pending, to, { answered, track: keep });
      }
      const end = await s.timeouts.begin(target.sandbox.team_id, id);
      reply.raw.once("close", end);
      const answer = await forward(req.raw, { ...to, agent });
      return relay(reply, answer, {
        headers(h) {
          if (from !== "query") return;
          const cookie = tokenCookie(req, id, port, token ?? "");
          const set = h["set-cookie"];
          h["set-cookie"] = set === undefined ? cookie : [...(Array.isArray(set) ? set : [set]), cookie];
          // The token is in this page's address: keep it out of Referer headers to other sites.
          h["referrer-policy"] ??= "same-origin";
        },
      });
    });

    scope.get("/tcp/:id/:port", async (req, reply) => {
      const { id, port } = parse(PortParams, req.params);
      const up = pending.get(req.raw);
      if (!up || String(req.headers.upgrade).toLowerCase() !== "websocket") {
        throw new SandtreeError("BAD_REQUEST", "this endpoint is a WebSocket: send `Upgrade: websocket`");
      }
      const { token } = tokenOf(req, port, false);
      // With an API key of the sandbox's team instead of a token, the port need not be exposed.
      const target =
        token === undefined && req.headers.authorization !== undefined
          ? await s.ports.authorizeTeam((await s.auth.authenticate(req.headers.authorization)).teamId, id, port)
          : await s.ports.authorize(id, port, token);
      const tcp = await s.ports.open(target);
      // Stays until the bridge takes over: an error in between must not go unhandled.
      tcp.on("error", () => {});
      pending.take(req.raw);
      reply.hijack();
      if (up.socket.destroyed) {
        tcp.destroy();
        return;
      }
      keep(tcp);
      let bridged = false;
      up.socket.once("close", () => {
        if (!bridged) tcp.destroy(); // the handshake failed
      });
      wss.handleUpgrade(req.raw, up.socket, up.head, (ws) => {
        bridged = true;
        keep(up.socket);
        const end = s.timeouts.beginSoon(target.sandbox.team_id, id);
        ws.once("close", end);
        bridgeTcp(ws, tcp);
      });
    });
  });
}

/** The ExposedPort answer: URLs on the address the client reached this server at. */
function render(req: FastifyRequest, p: ExposedPortInfo): ExposedPort {
  return {
    sandbox_id: p.sandbox_id,
    port: p.port,
    ...portUrls(req, p.sandbox_id, p.port),
    ...(p.token !== undefined ? { token: p.token } : {}),
    created_at: p.created_at,
  };
}

/** A port's `url` and `tcp_url` on the address the client reached this server at. */
export function portUrls(req: FastifyRequest, id: string, port: number): { url: string; tcp_url: string } {
  const base = `${req.protocol}://${req.host}`;
  const path = `${encodeURIComponent(id)}/${port}`;
  return { url: `${base}/ports/${path}/`, tcp_url: `${base.replace(/^http/, "ws")}/tcp/${path}` };
}

/** Path and query (null when there is none) of a request URL, as sent. */
function splitUrl(url: string): [string, string | null] {
  const q = url.indexOf("?");
  return q < 0 ? [url, null] : [url.slice(0, q), url.slice(q + 1)];
}

function queryKey(pair: string): string {
  const key = pair.split("=", 1)[0] ?? "";
  try {
    return decodeURIComponent(key.replaceAll("+", " "));
  } catch {
    return key;
  }
}

/** A URL with `sandtree_token` taken out of its query (for the guest, and for logs). */
export function withoutToken(url: string): string {
  const [pathname, query] = splitUrl(url);
  if (query === null) return url;
  const kept = query.split("&").filter((pair) => queryKey(pair) !== TOKEN_QUERY);
  return kept.length > 0 ? `${pathname}?${kept.join("&")}` : pathname;
}

/** `/ports/{id}/{port}/rest?query` -> `/rest?query` (the query without the token), encoding kept. */
function guestPath(url: string): string {
  const plain = withoutToken(url);
  // Segments: "", "ports", id, port, rest...
  let at = -1;
  for (let i = 0; i < 4; i++) {
    at = plain.indexOf("/", at + 1);
    if (at < 0) return "/";
  }
  return plain.slice(at);
}

function cookies(header: string | undefined): Array<[string, string]> {
  if (!header) return [];
  return header
    .split(";")
    .map((c) => c.trim())
    .filter((c) => c !== "")
    .map((c) => {
      const eq = c.indexOf("=");
      return eq < 0 ? [c, ""] : [c.slice(0, eq).trim(), c.slice(eq + 1).trim()];
    });
}

/** The port's token: the header, else the query, else (for /ports) the cookie the proxy set. */
function tokenOf(
  req: FastifyRequest,
  port: number,
  cookie = true,
): { token: string | undefined; from: "header" | "query" | "cookie" | null } {
  const header = req.headers[TOKEN_HEADER];
  if (typeof header === "string" && header !== "") return { token: header, from: "header" };
  const [, query] = splitUrl(req.url);
  for (const pair of query?.split("&") ?? []) {
    if (queryKey(pair) !== TOKEN_QUERY) continue;
    const eq = pair.indexOf("=");
    const value = eq < 0 ? "" : pair.slice(eq + 1);
    try {
      return { token: decodeURIComponent(value.replaceAll("+", " ")), from: "query" };
    } catch {
      return { token: value, from: "query" };
    }
  }
  if (cookie) {
    const found = cookies(req.headers.cookie).find(([name]) => name === `${TOKEN_COOKIE_PREFIX}${port}`);
    if (found) return { token: found[1], from: "cookie" };
  }
  return { token: undefined, from: null };
}

/** Lets a browser go on without the token in the address; only sent under this port's path. */
function tokenCookie(req: FastifyRequest, id: string, port: number, token: string): string {
  const secure = req.protocol === "https" ? "; Secure" : "";
  return `${TOKEN_COOKIE_PREFIX}${port}=${token}; Path=/ports/${encodeURIComponent(id)}/${port}/; HttpOnly; SameSite=Lax${secure}`;
}

/**
 * The host a proxied request names (`Host`): the guest's own loopback, which an app's host checks
 * accept by default (Django's, Vite's), wherever its machine runs; the bytes go through the machine.
 */
const GUEST_HOST = "127.0.0.1";

/** A port of the guest as the proxy's upstream: the client's headers minus the token, plus X-Forwarded-*. */
function guest(req: FastifyRequest, target: PortTarget, open: () => Promise<Duplex>): Upstream {
  const headers = forwardHeaders(req.raw, {
    drop: (name) => name === TOKEN_HEADER,
    rewrite(name, value) {
      if (name !== "cookie") return value;
      const kept = cookies(String(value)).filter(([n]) => !n.startsWith(TOKEN_COOKIE_PREFIX));
      return kept.length > 0 ? kept.map(([n, v]) => `${n}=${v}`).join("; ") : undefined;
    },
    host: `${GUEST_HOST}:${target.port}`,
    forwardedProto: req.protocol,
  });
  return {
    host: GUEST_HOST,
    port: target.port,
    stream: { key: `${target.sandbox.id}:${target.port}`, open },
    path: guestPath(req.url),
    headers,
    failure: (err) => portFailure(err, target),
  };
}

/**
 * Binary frames <-> the TCP connection, with backpressure both ways. A text frame `{"type":"eof"}`
 * from the client half-closes the guest connection; the guest's end closes the WebSocket (1000)
 * after what it sent, a failure with 1011.
 */
function bridgeTcp(ws: WebSocket, tcp: Duplex): void {
  let failed = false;
  tcp.on("error", () => {
    failed = true;
  });
  ws.on("error", () => tcp.destroy());
  tcp.on("data", (chunk: Buffer) => {
    ws.send(chunk, { binary: true }, () => {
      if (tcp.isPaused() && ws.bufferedAmount < HIGH_WATER) tcp.resume();
    });
    if (ws.bufferedAmount >= HIGH_WATER) tcp.pause();
  });
  tcp.on("drain", () => {
    if (ws.isPaused) ws.resume();
  });
  // A write that paused the socket is never followed by 'drain' once the client's EOF ended the
  // stream first (a Writable then emits 'finish' only): read on, or a close frame from either
  // side is never read and the close waits for ws's 30 s close timeout.
  tcp.once("finish", () => {
    if (ws.isPaused) ws.resume();
  });
  ws.on("message", (data: RawData, isBinary: boolean) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (!isBinary) {
      if (buf.toString("utf8").trim() === TCP_EOF_MESSAGE) tcp.end();
      return;
    }
    if (tcp.writable && !tcp.write(buf)) ws.pause();
  });
  tcp.once("close", (hadError?: boolean) => {
    const bad = hadError === true || failed;
    if (ws.readyState === WebSocket.OPEN) ws.close(bad ? 1011 : 1000, bad ? "guest connection failed" : "closed");
  });
  // What was written still goes, then the connection closes (net.Socket's destroySoon, for any stream).
  ws.once("close", () => {
    if (!tcp.writable) return void tcp.destroy();
    tcp.once("finish", () => tcp.destroy());
    tcp.end();
  });
}
