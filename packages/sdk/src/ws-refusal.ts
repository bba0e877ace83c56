import type { IncomingMessage } from "node:http";
import { ErrorBody } from "@sandtree/protocol";
import type { WebSocket } from "ws";
import { apiErrorFrom, InvalidResponseError } from "./errors.js";

/**
 * A refused WebSocket upgrade (401, 404, 409, 400) arrives as a plain HTTP answer with the
 * usual JSON error body: `fail` gets the typed error it stands for (`what` names the socket
 * in the message when the body is not one).
 */
export function onRefusedUpgrade(ws: WebSocket, what: string, fail: (err: Error) => void): void {
  ws.once("unexpected-response", (_req, res: IncomingMessage) => {
    let text = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => (text += d));
    res.on("end", () => {
      const status = res.statusCode ?? 0;
      try {
        fail(apiErrorFrom(status, ErrorBody.parse(JSON.parse(text))));
      } catch {
        fail(new InvalidResponseError(`the ${what} was refused with HTTP ${status}: ${text.slice(0, 200)}`));
      }
    });
    res.on("error", fail);
  });
}
