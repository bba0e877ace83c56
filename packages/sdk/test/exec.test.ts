import type { ServerResponse } from "node:http";
import { EXEC_STREAM_CONTENT_TYPE, ExecRecordKind, encodeExecEvent, execRecordHeader } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";
import { ConflictError, InvalidResponseError, NotFoundError, SandtreeClient } from "../src/index.js";
import { b64, commandResult, type FakeServer, fakeServer, type Recorded, sendJson, sleep } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

const started = { type: "started", exec_id: "ex_1", pid: 42 };
const exit = { type: "exit", exit_code: 3, signal: null, timed_out: false, duration_ms: 12 };
const text = (chunks: Uint8Array[]) => Buffer.concat(chunks).toString();

/** The binary exec stream of NDJSON-shaped events (output given base64, as in the NDJSON form). */
function binaryWire(events: unknown[]): Buffer {
  const parts: Uint8Array[] = [];
  for (const e of events as { type: string; data?: string }[]) {
    if (e.type === "stdout" || e.type === "stderr") {
      const data = Buffer.from(e.data ?? "", "base64");
      parts.push(execRecordHeader(e.type === "stdout" ? ExecRecordKind.STDOUT : ExecRecordKind.STDERR, data.length), data);
    } else parts.push(encodeExecEvent(e as Parameters<typeof encodeExecEvent>[0]));
  }
  return Buffer.concat(parts);
}

/**
 * Serves an exec stream of `events`, written in pieces of `piece` bytes with pauses, in the NDJSON
 * form (what a server before the binary stream answers) unless `binary`.
 */
async function execServer(events: unknown[], piece = 7, other?: (req: Recorded, res: ServerResponse) => void, binary = false) {
  server = await fakeServer(async (req, res) => {
    if (req.url.pathname.endsWith("/exec")) {
      res.writeHead(200, { "content-type": binary ? EXEC_STREAM_CONTENT_TYPE : "application/x-ndjson" });
      const wire = binary ? binaryWire(events) : Buffer.from(events.map((e) => `${JSON.stringify(e)}\n`).join(""));
      for (let i = 0; i < wire.length; i += piece) {
        res.write(wire.subarray(i, i + piece));
        await sleep(1);
      }
      res.end();
    } else if (other) other(req, res);
    else res.writeHead(204).end();
  });
  return new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
}

const outErr = [
  started,
  { type: "stdout", data: b64("out-1 ") },
  { type: "stderr", data: b64("err-1 ") },
  { type: "stdout", data: b64("out-2") },
  { type: "stderr", data: b64("err-2") },
  exit,
];

describe("exec streaming", () => {
  it.each([
    ["NDJSON", false],
    ["binary", true],
  ])("parses %s events cut at odd boundaries; pid and execId are known once exec() resolves", async (_form, binary) => {
    const client = await execServer(outErr, 5, undefined, binary);
    const h = await client.sandboxes.exec("sb_1", ["sh", "-c", "x"], { env: { A: "1" }, timeoutSeconds: 5 });
    expect(h.pid).toBe(42);
    expect(h.execId).toBe("ex_1");
    const events = [];
    for await (const e of h.output()) events.push(e.type === "exit" ? e : { type: e.type, data: Buffer.from(e.data).toString() });
    expect(events).toEqual([
      { type: "stdout", data: "out-1 " },
      { type: "stderr", data: "err-1 " },
      { type: "stdout", data: "out-2" },
      { type: "stderr", data: "err-2" },
      { ...exit },
    ]);
    const req = server?.requests[0];
    expect(req?.headers.accept).toBe(`${EXEC_STREAM_CONTENT_TYPE}, application/x-ndjson;q=0.5`);
    expect(JSON.parse(req?.body.toString() ?? "")).toEqual({ command: ["sh", "-c", "x"], env: { A: "1" }, timeout_seconds: 5 });
  });

  it("keeps stderr when only stdout is iterated, and stdout when iterated after wait()", async () => {
    const client = await execServer(outErr);
    const h = await client.sandboxes.exec("sb_1", "x");
    const out: Uint8Array[] = [];
    for await (const c of h.stdout) out.push(c);
    expect(text(out)).toBe("out-1 out-2");
    const result = await h.wait();
    expect(result).toEqual({ exit_code: 3, signal: null, timed_out: false, duration_ms: 12 });
    const err: Uint8Array[] = [];
    for await (const c of h.stderr) err.push(c);
    expect(text(err)).toBe("err-1 err-2");

    const h2 = await client.sandboxes.exec("sb_1", "x");
    expect((await h2.wait()).exit_code).toBe(3);
    const out2: Uint8Array[] = [];
    for await (const c of h2.stdout) out2.push(c);
    expect(text(out2)).toBe("out-1 out-2");
  });

  it("iterating stdout and stderr concurrently gives each its own bytes", async () => {
    const client = await execServer(outErr, 3);
    const h = await client.sandboxes.exec("sb_1", "x");
    const collect = async (it: AsyncIterable<Uint8Array>) => {
      const parts: Uint8Array[] = [];
      for await (const c of it) parts.push(c);
      return text(parts);
    };
    const [o, e, w] = await Promise.all([collect(h.stdout), collect(h.stderr), h.wait()]);
    expect([o, e, w.exit_code]).toEqual(["out-1 out-2", "err-1 err-2", 3]);
    await expect(collect(h.stdout)).resolves.toBe("");
  });

  it("refuses a second concurrent iteration of the same stream", async () => {
    const client = await execServer(outErr);
    const h = await client.sandboxes.exec("sb_1", "x");
    const a = h.stdout[Symbol.asyncIterator]();
    await a.next();
    await expect(h.output().next()).rejects.toMatchObject({ code: "ALREADY_ITERATING" });
    await a.return?.();
    expect((await h.wait()).exit_code).toBe(3);
  });

  it("caps what it keeps for a stream nobody reads, and counts what it dropped", async () => {
    const big = Buffer.alloc(3000, 97);
    const events = [started, ...Array.from({ length: 4 }, () => ({ type: "stderr", data: b64(big) })), exit];
    const client = await execServer(events, 4096);
    const h = await client.sandboxes.exec("sb_1", "x", { maxBufferedBytes: 5000 });
    await h.wait();
    const err: Uint8Array[] = [];
    for await (const c of h.stderr) err.push(c);
    expect(Buffer.concat(err).length).toBe(5000);
    expect(h.droppedBytes).toEqual({ stdout: 0, stderr: 7000 });
  });

  it("an error event rejects wait() and the iterators with the typed error", async () => {
    const client = await execServer([
      started,
      { type: "stdout", data: b64("partial") },
      { type: "error", code: "SANDBOX_NOT_RUNNING", message: "gone" },
    ]);
    const h = await client.sandboxes.exec("sb_1", "x");
    const out: Uint8Array[] = [];
    const err = await (async () => {
      for await (const c of h.stdout) out.push(c);
    })().catch((e: unknown) => e);
    expect(text(out)).toBe("partial");
    expect(err).toBeInstanceOf(ConflictError);
    await expect(h.wait()).rejects.toMatchObject({ code: "SANDBOX_NOT_RUNNING", status: 409 });
  });

  it("an error before start rejects exec() itself", async () => {
    const client = await execServer([{ type: "error", code: "SANDBOX_NOT_FOUND", message: "no such sandbox" }]);
    await expect(client.sandboxes.exec("sb_1", "x")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a stream cut before exit is reported, not mistaken for success", async () => {
    const client = await execServer([started, { type: "stdout", data: b64("x") }]);
    const h = await client.sandboxes.exec("sb_1", "x");
    await expect(h.wait()).rejects.toBeInstanceOf(InvalidResponseError);
  });

  it.each([
    ["cut inside a record", binaryWire([started, { type: "stdout", data: b64("abcdef") }]).subarray(0, -1), /without an exit/],
    ["with a record of an unknown kind", Buffer.concat([binaryWire([started]), Buffer.from([9, 0, 0, 0, 1, 0])]), /kind 9/],
  ])("a binary stream %s is an invalid response", async (_what, wire, message) => {
    server = await fakeServer((_req, res) => {
      res.writeHead(200, { "content-type": EXEC_STREAM_CONTENT_TYPE });
      res.end(wire);
    });
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    // Whether exec() or wait() sees it depends on where the chunks fall.
    const failure = await client.sandboxes
      .exec("sb_1", "x")
      .then((h) => h.wait())
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(InvalidResponseError);
    expect((failure as Error).message).toMatch(message);
  });

  it("kill, writeStdin and closeStdin hit the exec's endpoints", async () => {
    const client = await execServer(outErr);
    const h = await client.sandboxes.exec("sb 1", "cat", { stdinOpen: true });
    expect(JSON.parse(server?.requests[0]?.body.toString() ?? "")).toEqual({ command: "cat", stdin_open: true });
    await h.kill("SIGTERM");
    await h.writeStdin("hello");
    await h.closeStdin();
    const rest = server?.requests.slice(1).map((r) => [r.method, r.url.pathname + r.url.search, r.body.toString()]);
    expect(rest).toEqual([
      ["POST", "/v1/sandboxes/sb%201/execs/ex_1/signal", '{"signal":"SIGTERM"}'],
      ["POST", "/v1/sandboxes/sb%201/execs/ex_1/stdin", "hello"],
      ["POST", "/v1/sandboxes/sb%201/execs/ex_1/stdin?close=true", ""],
    ]);
    await h.close();
  });

  it("run() returns the buffered wire result", async () => {
    const result = commandResult({ stdout: "hi\n", duration_ms: 5 });
    server = await fakeServer((_req, res) => sendJson(res, 200, result));
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    await expect(client.sandboxes.run("sb_1", "echo hi", { cwd: "/tmp" })).resolves.toEqual(result);
    expect(server.requests[0]?.headers.accept).toBe("application/json");
    expect(JSON.parse(server.requests[0]?.body.toString() ?? "")).toEqual({ command: "echo hi", cwd: "/tmp" });
  });
});
