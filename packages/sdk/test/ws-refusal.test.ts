// A WebSocket upgrade the server refuses (a terminal, a tunnel) becomes the typed error its JSON
// body names; a body that is not the error format still gives an error that says what was refused.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { InvalidResponseError, NotFoundError } from "../src/errors.js";
import { onRefusedUpgrade } from "../src/ws-refusal.js";

let server: http.Server;
let url: string;

beforeAll(async () => {
  server = http.createServer();
  server.on("upgrade", (req, socket) => {
    const json = req.url === "/json";
    const body = json
      ? JSON.stringify({ code: "NOT_FOUND", message: "sandbox sb-1 not found", request_id: "req-1", details: {} })
      : "<html>bad gateway</html>";
    const status = json ? "404 Not Found" : "502 Bad Gateway";
    socket.end(
      `HTTP/1.1 ${status}\r\ncontent-type: ${json ? "application/json" : "text/html"}\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

function refusal(path: string, what: string): Promise<Error> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url}${path}`);
    ws.on("error", () => {});
    onRefusedUpgrade(ws, what, resolve);
  });
}

describe("a refused WebSocket upgrade", () => {
  it("becomes the typed error of its JSON body", async () => {
    const err = await refusal("/json", "terminal");
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).code).toBe("NOT_FOUND");
    expect(err.message).toContain("sb-1");
  });

  it("names what was refused when the body is not an error", async () => {
    const err = await refusal("/html", "tunnel");
    expect(err).toBeInstanceOf(InvalidResponseError);
    expect(err.message).toContain("the tunnel was refused with HTTP 502");
  });
});
