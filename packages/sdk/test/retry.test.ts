import { describe, expect, it } from "vitest";
import { ConnectionError, DEFAULT_RETRY, RateLimitError, SandtreeClient, ServerError } from "../src/index.js";
import { retryDelay } from "../src/retry.js";
import { commandResult, type FakeServer, fakeServer, sandbox, sendJson } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

const fast = { initialDelayMs: 1, maxDelayMs: 5 };
const client = (s: FakeServer, retry: Record<string, number> = fast) => new SandtreeClient({ apiUrl: s.url, apiKey: "k", retry });

/** Answers each request with the next status of the script (then 200 with a sandbox). */
async function scripted(statuses: Array<number | "reset">, headers: Record<string, string> = {}) {
  let i = 0;
  server = await fakeServer((req, res) => {
    const step = statuses[i++];
    if (step === "reset") return void res.socket?.destroy();
    if (step === undefined) {
      const body = req.body.length > 0 ? JSON.parse(req.body.toString()) : {};
      return sendJson(res, req.method === "POST" ? 201 : 200, sandbox({ labels: body.labels ?? {} }));
    }
    sendJson(res, step, { code: step === 429 ? "RATE_LIMIT_BURST" : "UNAVAILABLE", message: "later" }, headers);
  });
  return server;
}

describe("retries", () => {
  it("retries 429 and 5xx until an answer comes", async () => {
    const s = await scripted([429, 503, 502, 500]);
    const sb = await client(s).sandboxes.get("sb_1");
    expect(sb.id).toBe("sb_1");
    expect(s.requests).toHaveLength(5);
  });

  it("gives up after maxAttempts (default 5) with the last error", async () => {
    const s = await scripted([503, 503, 503, 503, 503, 503, 503]);
    await expect(client(s).sandboxes.get("sb_1")).rejects.toBeInstanceOf(ServerError);
    expect(s.requests).toHaveLength(DEFAULT_RETRY.maxAttempts);
    const s2 = await scripted([503, 503, 503]);
    await expect(client(s2, { ...fast, maxAttempts: 2 }).sandboxes.get("sb_1")).rejects.toBeInstanceOf(ServerError);
    expect(s2.requests).toHaveLength(2);
    await s2.close();
  });

  it("waits as long as Retry-After says", async () => {
    // The retry loop waits what retryDelay decides for the error it got: check that decision for
    // the error a real `Retry-After: 1` answer produces (wall time on a busy host says little).
    const s = await scripted([429], { "retry-after": "1" });
    const err = await client(s, { ...fast, maxAttempts: 1 })
      .sandboxes.get("sb_1")
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).retryAfterMs).toBe(1000);
    const policy = { ...DEFAULT_RETRY, initialDelayMs: 100 };
    expect(retryDelay(err, 1, policy, () => 0)).toBe(1000);
    expect(retryDelay(err, 4, policy, () => 0.999)).toBe(1099);
    expect(retryDelay(new RateLimitError({ status: 429, code: "RATE_LIMITED", message: "later" }), 1, policy, () => 0)).toBe(50);
  });

  it("does not wait for a Retry-After beyond maxRetryAfterMs", async () => {
    const s = await scripted([429], { "retry-after": "3600" });
    const err = await client(s)
      .sandboxes.list()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(s.requests).toHaveLength(1);
  });

  it("never resends a command that may have run: exec is not retried on 5xx or a broken connection", async () => {
    const s = await scripted([500]);
    await expect(client(s).sandboxes.run("sb_1", "echo once")).rejects.toBeInstanceOf(ServerError);
    expect(s.requests).toHaveLength(1);
    const s2 = await scripted(["reset"]);
    await expect(client(s2).sandboxes.run("sb_1", "echo once")).rejects.toBeInstanceOf(ConnectionError);
    expect(s2.requests).toHaveLength(1);
    await s2.close();
  });

  it("a 429 is retried for any method: the server did nothing", async () => {
    const s = await scripted([429], { "retry-after": "0" });
    server = s;
    let n = 0;
    await s.close();
    server = await fakeServer((_req, res) => {
      if (n++ === 0) return sendJson(res, 429, { code: "RATE_LIMITED", message: "slow" }, { "retry-after": "0" });
      sendJson(res, 200, commandResult({ stdout: "x" }));
    });
    const r = await client(server).sandboxes.run("sb_1", "echo");
    expect(r.stdout).toBe("x");
    expect(server.requests).toHaveLength(2);
  });

  it("create sends one generated idempotency_key and reuses it on every retry", async () => {
    const s = await scripted([503, "reset", 429]);
    const sb = await client(s).sandboxes.create({ image: "alpine", labels: { a: "1" } });
    expect(sb.labels).toEqual({ a: "1" });
    expect(s.requests).toHaveLength(4);
    const keys = s.requests.map((r) => JSON.parse(r.body.toString()).idempotency_key as string);
    expect(keys[0]).toMatch(/^sdk-[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);
    // A second create is a different sandbox: a new key.
    await client(s).sandboxes.create({ image: "alpine" });
    expect(JSON.parse(s.requests[4]?.body.toString() ?? "{}").idempotency_key).not.toBe(keys[0]);
  });

  it("keeps the caller's own idempotency_key", async () => {
    const s = await scripted([]);
    await client(s).sandboxes.create({ image: "alpine", idempotency_key: "mine" });
    expect(JSON.parse(s.requests[0]?.body.toString() ?? "{}").idempotency_key).toBe("mine");
  });

  it("retries a refused connection", async () => {
    const c = new SandtreeClient({ apiUrl: "http://127.0.0.1:9", apiKey: "k", retry: { ...fast, maxAttempts: 3 } });
    await expect(c.sandboxes.run("sb_1", "true")).rejects.toBeInstanceOf(ConnectionError);
  });

  it("backs off exponentially with jitter, capped", () => {
    const p = { ...DEFAULT_RETRY, initialDelayMs: 100, maxDelayMs: 1000 };
    expect(retryDelay(new Error("x"), 1, p, () => 0)).toBe(50);
    expect(retryDelay(new Error("x"), 1, p, () => 0.999)).toBe(99);
    expect(retryDelay(new Error("x"), 3, p, () => 0)).toBe(200);
    expect(retryDelay(new Error("x"), 10, p, () => 0.999)).toBeLessThanOrEqual(1000);
  });

  it("is configurable through SANDTREE_MAX_ATTEMPTS", async () => {
    const s = await scripted([503, 503, 503]);
    const c = new SandtreeClient({ apiUrl: s.url, apiKey: "k", retry: fast, env: { SANDTREE_MAX_ATTEMPTS: "1" } });
    await expect(c.sandboxes.get("x")).rejects.toBeInstanceOf(ServerError);
    expect(s.requests).toHaveLength(1);
  });
});
