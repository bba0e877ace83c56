// A tiny HTTP server for SDK unit tests (error mapping, stream parsing, pagination).
// End-to-end behaviour is tested against the real server elsewhere.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Sandbox } from "@sandtree/protocol";
import { onTestFinished } from "vitest";

export interface Recorded {
  method: string;
  url: URL;
  headers: IncomingMessage["headers"];
  body: Buffer;
}

export type Handler = (req: Recorded, res: ServerResponse) => void | Promise<void>;

export interface FakeServer {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

export async function fakeServer(handler: Handler): Promise<FakeServer> {
  const requests: Recorded[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const recorded: Recorded = {
      method: req.method ?? "GET",
      url: new URL(req.url ?? "/", "http://x"),
      headers: req.headers,
      body: Buffer.concat(chunks),
    };
    requests.push(recorded);
    try {
      await handler(recorded, res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(599);
      res.end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  // Closed when the test that started it ends, whatever became of it.
  onTestFinished(close);
  return { url: `http://127.0.0.1:${port}`, requests, close };
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** A whole Sandbox as the API answers it, `over` on top: the fixture of the SDK's, the CLI's and the store's tests. */
export function wholeSandbox(over: Partial<Sandbox> = {}): Sandbox {
  return {
    id: "sb_1",
    name: null,
    team_id: "default",
    image: "alpine:3.20",
    image_digest: null,
    status: "PENDING",
    cpu_cores: 1,
    memory_gb: 0.5,
    disk_size_gb: 4,
    environment_vars: {},
    labels: {},
    start_command: null,
    display: null,
    nested_virtualization: false,
    accel: null,
    error_reason: null,
    error_code: null,
    created_at: "2025-01-01T00:00:00.000Z",
    updated_at: "2025-01-01T00:00:00.000Z",
    started_at: null,
    terminated_at: null,
    ...over,
  };
}

/** wholeSandbox with any fields on top (a server's answer may carry more, or other values). */
export function sandbox(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...wholeSandbox(), ...overrides };
}

/** A finished command's wire result (POST /exec's answer), exit 0 unless `overrides` say otherwise. */
export function commandResult(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    stdout: "",
    stderr: "",
    exit_code: 0,
    signal: null,
    timed_out: false,
    stdout_truncated: false,
    stderr_truncated: false,
    duration_ms: 1,
    ...overrides,
  };
}

export const b64 = (s: string | Uint8Array) => Buffer.from(s).toString("base64");
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
