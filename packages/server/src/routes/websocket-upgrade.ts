import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type WebSocket, WebSocketServer } from "ws";
import { upgrades } from "./upgrades.js";

/** What a WebSocket route opens for a connection, and how it joins it to the socket. */
export interface WebSocketSession<T> {
  /** Opens what the socket will carry (a process, a VNC stream); its errors answer as JSON. */
  open(): Promise<T>;
  /** Ends it when the client left before the WebSocket was up (while it opened, or in the handshake). */
  abandon(resource: T): void;
  /** Joins it to the upgraded socket. */
  bridge(ws: WebSocket, resource: T): void;
}

/**
 * The upgrade side of the API's WebSocket routes (pty, desktop VNC), one per route: a request
 * goes through fastify's router like any other (auth hook, validation, JSON errors; see
 * upgrades.ts), and the socket is upgraded only once `open` succeeded. The one subprotocol
 * offered back is `subprotocol` (a browser's `bearer.<key>` is read by upgrades.ts, never echoed).
 */
export function webSocketUpgrades(app: FastifyInstance, subprotocol: string) {
  const pending = upgrades(app);
  const live = new Set<WebSocket>();
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 1024 * 1024,
    handleProtocols: (protocols) => (protocols.has(subprotocol) ? subprotocol : false),
  });
  // Upgraded sockets still count for server.close(): end them first, or close would wait forever.
  app.addHook("preClose", async () => {
    for (const ws of live) ws.terminate();
  });

  /** Call once the route parsed its params and query: refuses a request that is not an upgrade. */
  return async function upgrade<T>(req: FastifyRequest, reply: FastifyReply, session: WebSocketSession<T>): Promise<void> {
    const up = pending.get(req.raw);
    if (!up || String(req.headers.upgrade).toLowerCase() !== "websocket") {
      throw new SandtreeError("BAD_REQUEST", "this endpoint is a WebSocket: send `Upgrade: websocket`");
    }
    const resource = await session.open();
    pending.take(req.raw);
    reply.hijack();
    if (up.socket.destroyed) {
      session.abandon(resource); // the client left while it opened
      return;
    }
    let bridged = false;
    up.socket.once("close", () => {
      if (!bridged) session.abandon(resource); // the handshake failed
    });
    wss.handleUpgrade(req.raw, up.socket, up.head, (ws) => {
      bridged = true;
      live.add(ws);
      ws.once("close", () => live.delete(ws));
      session.bridge(ws, resource);
    });
  };
}
