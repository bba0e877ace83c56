import { DesktopVncQuery } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import type { RawData, WebSocket } from "ws";
import { z } from "zod";
import { parse } from "../errors.js";
import type { VncStream } from "../services/desktop/vnc-stream.js";
import type { Services } from "../services/services.js";
import { frameBytes, inputQueue, sendOutput } from "./websocket-pump.js";
import { webSocketUpgrades } from "./websocket-upgrade.js";

const Params = z.object({ id: z.string().min(1).max(64) });

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
  const input = inputQueue(ws);
  ws.on("message", (data: RawData) => input.write(frameBytes(data), (buf) => vnc.write(buf)));
  ws.on("close", () => vnc.close());
  ws.on("error", () => {});
  void (async () => {
    try {
      await sendOutput(ws, vnc.output);
      ws.close(1000, "the VNC server ended");
    } catch {
      ws.close(1011, "guest error");
    } finally {
      vnc.close();
    }
  })();
}
