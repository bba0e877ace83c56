import { DesktopVncQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { type RawData, WebSocket } from "ws";
import { z } from "zod";
import { parse } from "../errors.js";
import type { VncStream } from "../services/desktop/vnc-stream.js";
import type { Services } from "../services/services.js";
import { webSocketUpgrades } from "./websocket-upgrade.js";

const Params = z.object({ id: z.string().min(1).max(64) });
/** Above this many unsent bytes either way we stop reading the other side. */
const HIGH_WATER = 1024 * 1024;

/**
 * `GET /v1/sandboxes/{id}/desktop/vnc`: the display live, as a WebSocket of raw RFB bytes (what
 * noVNC and websockify-speaking viewers expect). Authenticated like every API route (a browser
 * offers `bearer.<key>` as a subprotocol); the socket is upgraded only once x11vnc answered, so
 * NO_DISPLAY and the rest arrive as ordinary JSON errors.
 */
export function desktopVncRoutes(app: FastifyInstance, s: Services): void {
  // noVNC offers "binary".
  const upgrade = webSocketUpgrades(app, "binary");
  app.get("/v1/sandboxes/:id/desktop/vnc", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { interactive } = parse(DesktopVncQuery, req.query);
    await upgrade(req, reply, {
      open: () => s.desktop.openVnc(req.principal.teamId, id, interactive),
      abandon: (vnc) => vnc.close(),
      bridge,
    });
  });
}

/** Binary frames carry the RFB bytes both ways; either side ending closes the other. */
function bridge(ws: WebSocket, vnc: VncStream): void {
  let input = Promise.resolve();
  let pending = 0;
  ws.on("message", (data: RawData) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    pending += buf.length;
    if (pending > HIGH_WATER) ws.pause();
    input = input
      .then(() => vnc.write(buf))
      .catch(() => {})
      .finally(() => {
        pending -= buf.length;
        if (pending <= HIGH_WATER && ws.isPaused) ws.resume();
      });
  });
  ws.on("close", () => vnc.close());
  ws.on("error", () => {});
  void (async () => {
    try {
      for await (const chunk of vnc.output) {
        if (ws.readyState !== WebSocket.OPEN) break;
        if (ws.bufferedAmount < HIGH_WATER) ws.send(chunk, { binary: true });
        else await new Promise<void>((resolve) => ws.send(chunk, { binary: true }, () => resolve()));
      }
      ws.close(1000, "the VNC server ended");
    } catch {
      ws.close(1011, "guest error");
    } finally {
      vnc.close();
    }
  })();
}
