import { type IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { PTY_SUBPROTOCOL, PtyClientMessage, PtyQuery, type PtyServerMessage, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import { z } from "zod";
import { parse } from "../errors.js";
import type { PtySession } from "../services/pty-service.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });
/** Above this many unsent bytes we stop taking output (the guest then runs out of credit). */
const HIGH_WATER = 1024 * 1024;

interface Upgrade {
  socket: Duplex;
  head: Buffer;
}

/**
 * `GET /v1/sandboxes/{id}/pty`: an interactive process over a WebSocket. Upgrade requests go
 * through fastify's router like any request (auth hook, validation, JSON errors), and the
 * route's handler upgrades only once the process started.
 */
export function ptyRoutes(app: FastifyInstance, s: Services): void {
  const upgrades = new WeakMap<IncomingMessage, Upgrade>();
  const open = new Set<WebSocket>();
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 1024 * 1024,
    // Browsers cannot set headers: they offer `bearer.<key>` (read below) and this protocol.
    handleProtocols: (protocols) => (protocols.has(PTY_SUBPROTOCOL) ? PTY_SUBPROTOCOL : false),
  });

  app.server.on("upgrade", (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    // With this listener Node hands us every Upgrade request (h2c too), its body left unparsed:
    // routing works only for bodiless ones, so a body-carrying non-WebSocket upgrade is refused.
    const body = Number(raw.headers["content-length"] ?? 0) > 0 || raw.headers["transfer-encoding"] !== undefined;
    if (body && String(raw.headers.upgrade).toLowerCase() !== "websocket") {
      const msg = JSON.stringify({ code: "BAD_REQUEST", message: "send this request without an Upgrade header" });
      socket.end(
        `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${msg.length}\r\nconnection: close\r\n\r\n${msg}`,
      );
      return;
    }
    if (!raw.headers.authorization) {
      const offered = String(raw.headers["sec-websocket-protocol"] ?? "").split(",");
      const bearer = offered.map((p) => p.trim()).find((p) => p.startsWith("bearer."));
      if (bearer) raw.headers.authorization = `Bearer ${bearer.slice("bearer.".length)}`;
    }
    upgrades.set(raw, { socket, head });
    const res = new ServerResponse(raw);
    res.assignSocket(socket as never);
    // An answer without an upgrade (401, 404, ...) ends the connection once written.
    res.on("finish", () => {
      if (upgrades.has(raw)) socket.end();
    });
    app.routing(raw, res);
  });
  // Upgraded sockets still count for server.close(): end them first, or close would wait forever.
  app.addHook("preClose", async () => {
    for (const ws of open) ws.terminate();
  });

  app.get("/v1/sandboxes/:id/pty", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const query = parse(PtyQuery, req.query);
    const up = upgrades.get(req.raw);
    if (!up || String(req.headers.upgrade).toLowerCase() !== "websocket") {
      throw new SandtreeError("BAD_REQUEST", "this endpoint is a WebSocket: send `Upgrade: websocket`");
    }
    const pty = await s.pty.open(req.principal.teamId, id, query);
    upgrades.delete(req.raw);
    reply.hijack();
    if (up.socket.destroyed) {
      pty.kill(); // the client left while the process started
      return;
    }
    let bridged = false;
    up.socket.once("close", () => {
      if (!bridged) pty.kill(); // the handshake failed
    });
    wss.handleUpgrade(req.raw, up.socket, up.head, (ws) => {
      bridged = true;
      open.add(ws);
      ws.once("close", () => open.delete(ws));
      bridge(ws, pty);
    });
  });
}

function send(ws: WebSocket, msg: PtyServerMessage): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
}

/** Binary frames are terminal bytes both ways; text frames are JSON control messages. */
function bridge(ws: WebSocket, pty: PtySession): void {
  let exited = false;
  // Keystrokes in order; past HIGH_WATER pending bytes we stop reading the socket.
  let input = Promise.resolve();
  let pending = 0;
  ws.on("message", (data: RawData, isBinary: boolean) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (!isBinary) {
      // After the keystrokes before it (an `eof` must not overtake them); a signal goes at once.
      const msg = control(ws, buf);
      if (msg?.type === "signal") run(ws, () => pty.signal(msg.signal));
      else if (msg) input = input.then(() => run(ws, () => (msg.type === "eof" ? pty.eof() : pty.resize(msg.rows, msg.cols))));
      return;
    }
    pending += buf.length;
    if (pending > HIGH_WATER) ws.pause();
    input = input
      .then(() => pty.write(buf))
      .catch(() => {})
      .finally(() => {
        pending -= buf.length;
        if (pending <= HIGH_WATER && ws.isPaused) ws.resume();
      });
  });
  ws.on("close", () => {
    if (!exited) pty.kill();
  });
  ws.on("error", () => {});
  void (async () => {
    try {
      for await (const chunk of pty.output) {
        if (ws.readyState !== WebSocket.OPEN) break;
        if (ws.bufferedAmount < HIGH_WATER) ws.send(chunk, { binary: true });
        else await new Promise<void>((resolve) => ws.send(chunk, { binary: true }, () => resolve()));
      }
      const exit = await pty.exited;
      exited = true;
      send(ws, { type: "exit", exit_code: exit.exit_code, signal: exit.signal });
      ws.close(1000, "exited");
    } catch (err) {
      send(ws, { type: "error", code: "GUEST_ERROR", message: (err as Error).message });
      ws.close(1011, "guest error");
    }
  })();
}

/** A control message, or null after telling the client what was wrong with it. */
function control(ws: WebSocket, buf: Buffer): PtyClientMessage | null {
  try {
    return PtyClientMessage.parse(JSON.parse(buf.toString("utf8")));
  } catch {
    send(ws, {
      type: "error",
      code: "VALIDATION_FAILED",
      message: `invalid control message: ${buf.toString("utf8").slice(0, 200)}`,
    });
    return null;
  }
}

function run(ws: WebSocket, action: () => void): void {
  try {
    action();
  } catch (err) {
    const code = err instanceof SandtreeError ? err.code : "GUEST_ERROR";
    send(ws, { type: "error", code, message: (err as Error).message });
  }
}
