import { type IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { newRequestId, writeSocketError } from "../errors.js";

export interface Upgrade {
  socket: Duplex;
  head: Buffer;
}

/** The Upgrade requests in flight through the router, by request. */
export interface Upgrades {
  /** The socket of an Upgrade request, while nobody took it. */
  get(raw: IncomingMessage): Upgrade | undefined;
  /** Takes the socket over: answers through `reply` no longer end it. */
  take(raw: IncomingMessage): Upgrade | undefined;
}

const installed = new WeakMap<FastifyInstance, Upgrades>();

/**
 * Routes every Upgrade request through fastify's router like any request (hooks, validation,
 * JSON errors), once per app; routes that handle upgrades `take()` the socket. A route that
 * answers without taking it (401, 404, ...) ends the connection once the answer is written.
 */
export function upgrades(app: FastifyInstance): Upgrades {
  const known = installed.get(app);
  if (known) return known;
  const pending = new WeakMap<IncomingMessage, Upgrade>();
  app.server.on("upgrade", (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    // With this listener Node hands us every Upgrade request (h2c too), its body left unparsed:
    // routing works only for bodiless ones, so a body-carrying non-WebSocket upgrade is refused.
    const body = Number(raw.headers["content-length"] ?? 0) > 0 || raw.headers["transfer-encoding"] !== undefined;
    if (body && String(raw.headers.upgrade).toLowerCase() !== "websocket") {
      const err = new SandtreeError("BAD_REQUEST", "send this request without an Upgrade header");
      writeSocketError(socket, raw, err, newRequestId());
      return;
    }
    const res = new ServerResponse(raw);
    res.assignSocket(socket as never);
    // Browsers cannot set headers on a WebSocket: API routes also take the key as the offered
    // subprotocol `bearer.<key>`. Only under /v1: elsewhere (the port proxy) headers go on to a sandbox.
    if (!raw.headers.authorization && raw.url?.startsWith("/v1/")) {
      const offered = String(raw.headers["sec-websocket-protocol"] ?? "").split(",");
      const bearer = offered.map((p) => p.trim()).find((p) => p.startsWith("bearer."));
      if (bearer) raw.headers.authorization = `Bearer ${bearer.slice("bearer.".length)}`;
    }
    pending.set(raw, { socket, head });
    res.on("finish", () => {
      if (pending.has(raw)) socket.end();
    });
    app.routing(raw, res);
  });
  const registry: Upgrades = {
    get: (raw) => pending.get(raw),
    take(raw) {
      const up = pending.get(raw);
      pending.delete(raw);
      return up;
    },
  };
  installed.set(app, registry);
  return registry;
}
