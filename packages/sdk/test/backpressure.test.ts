import { expect, it } from "vitest";
import { SandtreeClient } from "../src/index.js";
import { b64, type FakeServer, fakeServer, sleep } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

it("a paused stdout consumer stops the SDK from reading (no unbounded buffering)", async () => {
  const line = `${JSON.stringify({ type: "stdout", data: b64(Buffer.alloc(48 * 1024, 120)) })}\n`;
  const total = 1500; // about 96 MiB on the wire
  let written = 0;
  server = await fakeServer(async (_req, res) => {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(`${JSON.stringify({ type: "started", exec_id: "e", pid: 1 })}\n`);
    for (; written < total; written++) {
      if (!res.write(line)) await new Promise((r) => res.once("drain", r));
    }
    res.end(`${JSON.stringify({ type: "exit", exit_code: 0, signal: null, timed_out: false, duration_ms: 1 })}\n`);
  });
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
  const h = await client.sandboxes.exec("sb", "yes");
  const it = h.stdout[Symbol.asyncIterator]();
  await it.next();
  await sleep(300);
  // Socket buffers hold a few MiB at most; the rest must still wait on the server side.
  expect(written).toBeLessThan(total / 2);
  let bytes = 0;
  for (let r = await it.next(); !r.done; r = await it.next()) bytes += r.value.length;
  expect(bytes).toBe((total - 1) * 48 * 1024);
  expect((await h.wait()).exit_code).toBe(0);
});
