import { PTY_SUBPROTOCOL, PtyClientMessage, PtyQuery, type PtyServerMessage } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { type RawData, WebSocket } from "ws";
import { z } from "zod";
import { parse } from "../errors.js";
import type { PtySession } from "../services/commands/pty-service.js";
import { streamErrorCode } from "../services/observability/error-codes.js";
import type { Services } from "../services/services.js";
import { frameBytes, inputQueue, sendOutput } from "./websocket-pump.js";
import { webSocketUpgrades } from "./websocket-upgrade.js";

const Params = z.object({ id: z.string().min(1).max(64) });

/**
 * `GET /v1/sandboxes/{id}/pty`: an interactive process over a WebSocket. Upgrade requests go
 * through fastify's router like any request (auth hook, validation, JSON errors; see
 * upgrades.ts), and the route's handler upgrades only once the process started.
 */
export function ptyRoutes(app: FastifyInstance, s: Services): void {
  // Browsers cannot set headers: they offer `bearer.<key>` (read by upgrades.ts) and this protocol.
  const upgrade = webSocketUpgrades(app, PTY_SUBPROTOCOL);
  app.get("/v1/sandboxes/:id/pty", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const query = parse(PtyQuery, req.query);
    await upgrade(req, reply, {
      open: () => s.pty.open(req.principal.teamId, id, query),
      abandon: (pty) => pty.kill(),
      bridge,
    });
  });
}

function send(ws: WebSocket, msg: PtyServerMessage): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
}

/** Binary frames are terminal bytes both ways; text frames are JSON control messages. */
function bridge(ws: WebSocket, pty: PtySession): void {
  let exited = false;
  // Keystrokes in order; past a high-water mark of pending bytes we stop reading the socket.
  const input = inputQueue(ws);
  ws.on("message", (data: RawData, isBinary: boolean) => {
    const buf = frameBytes(data);
    if (!isBinary) {
      // After the keystrokes before it (an `eof` must not overtake them); a signal goes at once.
      const msg = control(ws, buf);
      if (msg?.type === "signal") run(ws, () => pty.signal(msg.signal));
      else if (msg) input.after(() => run(ws, () => (msg.type === "eof" ? pty.eof() : pty.resize(msg.rows, msg.cols))));
      return;
    }
    input.write(buf, (b) => pty.write(b));
  });
  ws.on("close", () => {
    if (!exited) pty.kill();
  });
  ws.on("error", () => {});
  void (async () => {
    try {
      await sendOutput(ws, pty.output);
      const exit = await pty.exited;
      exited = true;
      send(ws, { type: "exit", exit_code: exit.exit_code, signal: exit.signal });
      ws.close(1000, "exited");
    } catch (err) {
      send(ws, { type: "error", code: streamErrorCode(err, "GUEST_ERROR"), message: (err as Error).message });
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
    const code = streamErrorCode(err, "GUEST_ERROR");
    send(ws, { type: "error", code, message: (err as Error).message });
  }
}
