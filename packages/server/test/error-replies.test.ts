import net from "node:net";
import { AgentClosedError, GuestError, MachineRefusedError, MachineTimeoutError, runCommand } from "@sandtree/host";
import { QmpClosedError, QmpCommandError, QmpTimeoutError } from "@sandtree/host/qemu";
import { SandtreeError } from "@sandtree/protocol";
import { NotFoundError, SandtreeClient, ValidationError } from "@sandtree/sdk";
import { describe, expect, it } from "vitest";
import { renderError } from "../src/errors.js";
import { toApiError } from "../src/services/observability/error-codes.js";
import { serverForFile } from "./helpers.js";

const t = serverForFile();

/** Sends `request` as raw bytes and reads the whole answer (the server closes the connection). */
function rawRequest(url: string, request: string): Promise<{ status: number; headers: string; body: unknown }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), hostname, () => sock.end(request));
    let text = "";
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => (text += d));
    sock.on("error", reject);
    sock.on("close", () => {
      const [head = "", body = ""] = text.split("\r\n\r\n");
      resolve({ status: Number(head.split(" ")[1]), headers: head.toLowerCase(), body: JSON.parse(body) });
    });
  });
}

describe("one error path: every error answer is {code, message, details?, request_id}", () => {
  it("404 for an unknown route and 400 for an invalid body carry a code and the request id", async () => {
    const auth = { authorization: `Bearer ${t.key}` };
    const missing = await t.server.app.inject({ method: "GET", url: "/v1/no-such-route?x=1", headers: auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: "ROUTE_NOT_FOUND", message: "no route GET /v1/no-such-route" });
    expect(missing.json().request_id).toMatch(/^req_/);
    expect(missing.headers["x-request-id"]).toBe(missing.json().request_id);

    const invalid = await t.server.app.inject({
      method: "POST",
      url: "/v1/sandboxes",
      headers: auth,
      payload: { image: "x", cpu_cores: 0 },
    });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "cpu_cores" } });
    expect(invalid.json().request_id).toBe(invalid.headers["x-request-id"]);
  });

  it("refused upgrades, before and after routing, carry a code and the request id", async () => {
    // Refused on arrival, before fastify sees it: an Upgrade request that carries a body.
    const h2c = await rawRequest(
      t.url,
      "POST /v1/sandboxes HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: h2c\r\ncontent-length: 2\r\n\r\n{}",
    );
    expect(h2c.status).toBe(400);
    expect(h2c.body).toMatchObject({ code: "BAD_REQUEST", message: "send this request without an Upgrade header" });
    expect((h2c.body as { request_id: string }).request_id).toMatch(/^req_/);
    // Routed, refused by the auth hook: a WebSocket to the PTY without a key.
    const ws = await rawRequest(
      t.url,
      "GET /v1/sandboxes/sb-nope/pty HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n" +
        "sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    expect(ws.status).toBe(401);
    expect(ws.body).toMatchObject({ code: "UNAUTHORIZED" });
    expect((ws.body as { request_id: string }).request_id).toMatch(/^req_/);
  });

  it("the SDK turns those answers into typed errors by their code, with the request id", async () => {
    const client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key, retry: { maxAttempts: 1 } });
    const gone = await client.sandboxes.get("sb-nope").catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(NotFoundError);
    expect(gone).toMatchObject({ code: "SANDBOX_NOT_FOUND", status: 404, requestId: expect.stringMatching(/^req_/) });
    const bad = await client.sandboxes.create({ image: "x", cpu_cores: 0 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ValidationError);
    expect(bad).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "cpu_cores" } });
    // A refused WebSocket: the PTY of a sandbox that does not exist.
    const pty = await client.sandboxes.pty("sb-nope").catch((e: unknown) => e);
    expect(pty).toBeInstanceOf(NotFoundError);
    expect(pty).toMatchObject({ code: "SANDBOX_NOT_FOUND", status: 404, requestId: expect.stringMatching(/^req_/) });
  });
});

describe("host errors get stable codes at the service boundary", () => {
  it("QEMU, agent and host-tool failures map to codes; an unknown error is a plain, logged 500", async () => {
    expect(toApiError(new QmpTimeoutError("QMP stop did not answer in time"))).toMatchObject({
      code: "VM_UNRESPONSIVE",
      status: 504,
    });
    expect(toApiError(new QmpClosedError())).toMatchObject({ code: "VM_ERROR", status: 502 });
    expect(toApiError(new QmpCommandError("GenericError", "no"))).toMatchObject({
      code: "VM_ERROR",
      details: { qmp_class: "GenericError" },
    });
    const refused = new MachineRefusedError("QMP DeviceNotFound: no disk", {
      cause: new QmpCommandError("DeviceNotFound", "no disk"),
    });
    expect(toApiError(refused)).toMatchObject({ code: "VM_ERROR", details: { qmp_class: "DeviceNotFound" } });
    expect(toApiError(new MachineTimeoutError("QMP stop did not answer in time"))).toMatchObject({ code: "VM_UNRESPONSIVE" });
    expect(toApiError(new AgentClosedError("closed"))).toMatchObject({ code: "GUEST_ERROR" });
    expect(toApiError(new GuestError("ENOENT", 2, "no such file"))).toMatchObject({ code: "FILE_NOT_FOUND", status: 404 });
    expect(toApiError(Object.assign(new Error("disk"), { code: "SQLITE_FULL" }))).toMatchObject({
      code: "HOST_DISK_FULL",
      status: 507,
    });
    const tool = await runCommand(["false"]).catch((e: unknown) => e);
    expect(tool).toBeInstanceOf(SandtreeError);
    expect(renderError(tool, "req_1")).toMatchObject({
      status: 500,
      body: { code: "HOST_COMMAND_FAILED", details: { command: ["false"], exitCode: 1 }, request_id: "req_1" },
    });

    const logged: string[] = [];
    const log = {
      warn: (_o: object, m: string) => logged.push(`warn ${m}`),
      error: (_o: object, m: string) => logged.push(`error ${m}`),
    };
    expect(toApiError(new Error("a bug"))).toBeUndefined();
    expect(renderError(new Error("a bug with a secret"), "req_2", log)).toEqual({
      status: 500,
      body: { code: "INTERNAL", message: "internal error", request_id: "req_2" },
    });
    expect(logged).toEqual(["error unhandled error"]);
  });
});

describe("a GET that carries a body", () => {
  /** GET `path` over a real socket with `bytes` of body, every byte written before the answer is read. */
  function getWithBody(path: string, bytes: number): Promise<{ status: number; text: string }> {
    const { hostname, port } = new URL(t.url);
    return new Promise((resolve, reject) => {
      const sock = net.connect(Number(port), hostname, () => {
        sock.write(
          `GET ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${bytes}\r\nconnection: close\r\n\r\n`,
        );
        sock.end("x".repeat(bytes));
      });
      const chunks: Buffer[] = [];
      sock.on("data", (d: Buffer) => chunks.push(d));
      // A refusal sent unread may be followed by a reset once the answer is in: the answer counts.
      sock.on("error", (err) => chunks.length === 0 && reject(err));
      sock.on("close", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: Number(text.split(" ")[1]), text: text.slice(text.indexOf("\r\n\r\n") + 4) });
      });
    });
  }

  it("gets its whole answer (the body read and dropped first), or 413 past the body limit", async () => {
    const ok = await getWithBody("/v1/openapi.json", 512 * 1024);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text).openapi).toMatch(/^3\./);
    const big = await getWithBody("/v1/openapi.json", 2 * 1024 * 1024);
    expect(big.status).toBe(413);
    expect(big.text).toContain('"code":"PAYLOAD_TOO_LARGE"');
  });
});
