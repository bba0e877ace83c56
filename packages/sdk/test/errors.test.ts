import { describe, expect, it } from "vitest";
import {
  AuthenticationError,
  ConfigurationError,
  ConflictError,
  ConnectionError,
  InvalidResponseError,
  NotFoundError,
  parseRetryAfter,
  RateLimitError,
  resolveConfig,
  SandtreeApiError,
  SandtreeClient,
  ServerError,
  TimeoutError,
  ValidationError,
} from "../src/index.js";
import { type FakeServer, fakeServer, sandbox, sendJson, sleep } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

async function clientAnswering(status: number, body: unknown, headers: Record<string, string> = {}) {
  server = await fakeServer((_req, res) => {
    if (typeof body === "string") {
      res.writeHead(status, headers);
      res.end(body);
    } else sendJson(res, status, body, headers);
  });
  // Error mapping, not retries (retry.test.ts): one attempt.
  return new SandtreeClient({ apiUrl: server.url, apiKey: "k", retry: { maxAttempts: 1 } });
}

describe("error mapping", () => {
  it.each([
    [401, "UNAUTHORIZED", AuthenticationError],
    [404, "SANDBOX_NOT_FOUND", NotFoundError],
    [409, "SANDBOX_NOT_RUNNING", ConflictError],
    [400, "VALIDATION_FAILED", ValidationError],
    [502, "GUEST_ERROR", ServerError],
  ] as const)("%i %s becomes %s", async (status, code, type) => {
    const client = await clientAnswering(status, { code, message: "nope", request_id: "req_1", details: { field: "x" } });
    const err = await client.sandboxes.get("sb_1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(type);
    expect(err).toBeInstanceOf(SandtreeApiError);
    expect(err).toMatchObject({ status, code, requestId: "req_1", details: { field: "x" } });
    expect((err as Error).message).toMatch(/^nope/);
  });

  it("429 carries Retry-After in ms", async () => {
    const client = await clientAnswering(429, { code: "RATE_LIMITED", message: "slow down" }, { "retry-after": "3" });
    const err = await client.sandboxes.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).retryAfterMs).toBe(3000);
  });

  it("a non-JSON error body still becomes a typed error", async () => {
    const client = await clientAnswering(503, "Bad Gateway from proxy", { "x-request-id": "r9" });
    const err = await client.sandboxes.get("x").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerError);
    expect(err).toMatchObject({
      code: "HTTP_503",
      status: 503,
      requestId: "r9",
      message: expect.stringContaining("Bad Gateway"),
    });
  });

  it("a 2xx answer of the wrong shape is an InvalidResponseError", async () => {
    const client = await clientAnswering(200, { id: 3 });
    await expect(client.sandboxes.get("x")).rejects.toBeInstanceOf(InvalidResponseError);
  });

  it("sends the bearer key and parses a valid answer", async () => {
    const client = await clientAnswering(200, sandbox({ status: "RUNNING" }));
    const sb = await client.sandboxes.get("sb 1");
    expect(sb.status).toBe("RUNNING");
    expect(server?.requests[0]?.headers.authorization).toBe("Bearer k");
    expect(server?.requests[0]?.url.pathname).toBe("/v1/sandboxes/sb%201");
  });

  it("an unreachable server is a ConnectionError that says what to do", async () => {
    const client = new SandtreeClient({ apiUrl: "http://127.0.0.1:9", apiKey: "k", retry: { maxAttempts: 1 } });
    const err = await client.sandboxes.get("x").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as ConnectionError).code).toBe("CONNECTION_FAILED");
    expect((err as Error).message).toMatch(/sandtree serve/);
  });

  it("a slow server hits the client timeout; the caller's signal wins over it", async () => {
    server = await fakeServer(async (_req, res) => {
      await sleep(2000);
      sendJson(res, 200, sandbox());
    });
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k", timeoutMs: 100 });
    const err = await client.sandboxes.get("x").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ code: "CLIENT_TIMEOUT", timeoutMs: 100 });

    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(new Error("user gave up")), 20);
    await expect(client.sandboxes.get("x", { signal: ctrl.signal })).rejects.toThrow("user gave up");
  });
});

describe("configuration", () => {
  it("needs an API key, with a message saying where to get one", () => {
    expect(() => new SandtreeClient({ env: {} })).toThrow(ConfigurationError);
    expect(() => new SandtreeClient({ env: {} })).toThrow(/SANDTREE_API_KEY/);
  });

  it("explicit option beats env beats default", () => {
    expect(resolveConfig({ env: { SANDTREE_API_KEY: "e" } })).toMatchObject({ apiUrl: "http://127.0.0.1:7070", apiKey: "e" });
    expect(
      resolveConfig({ apiKey: "o", apiUrl: "http://h:1", env: { SANDTREE_API_KEY: "e", SANDTREE_API_URL: "http://env:2" } }),
    ).toMatchObject({ apiUrl: "http://h:1", apiKey: "o" });
    expect(resolveConfig({ env: { SANDTREE_API_KEY: "e", SANDTREE_API_URL: "http://env:2" } }).apiUrl).toBe("http://env:2");
    expect(() => resolveConfig({ apiKey: "k", apiUrl: "localhost:7070" })).toThrow(/not an http/);
  });

  it("parses Retry-After as seconds or a date", () => {
    expect(parseRetryAfter("1.5")).toBe(1500);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter("soon")).toBeUndefined();
  });
});
