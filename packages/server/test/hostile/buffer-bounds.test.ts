import { describe, expect, it } from "vitest";
import { HeadBuffer } from "../../src/services/commands/output-spill.js";
import { SUBSCRIBER_QUEUE_CAP, Subscriber } from "../../src/services/commands/process-table.js";

// What the server holds in memory of a guest's output is bounded, whatever the guest sends.
describe("per-sandbox buffers a hostile guest fills", () => {
  it("a background process's reader that does not read holds at most SUBSCRIBER_QUEUE_CAP, and still gets the end", async () => {
    const sub = new Subscriber(() => {});
    const chunk = Buffer.alloc(32 * 1024, 120);
    sub.push({ type: "start", pid: 7 });
    for (let i = 0; i < 1024; i++) sub.push({ type: "stdout", data: chunk }); // 32 MiB sent
    sub.push({ type: "end", exit_code: 0, signal: null, timed_out: false });
    sub.end();
    expect(sub.queuedBytes).toBeLessThanOrEqual(SUBSCRIBER_QUEUE_CAP);
    expect(sub.droppedBytes).toBe(32 * 1024 * 1024 - sub.queuedBytes);
    const seen: string[] = [];
    let bytes = 0;
    for await (const ev of sub) {
      seen.push(ev.type);
      if ("data" in ev) bytes += ev.data.length;
    }
    expect(bytes).toBe(SUBSCRIBER_QUEUE_CAP);
    expect(seen[0]).toBe("start");
    expect(seen.at(-1)).toBe("end");
    expect(sub.queuedBytes).toBe(0);
  });

  it("a reader that keeps up loses nothing", async () => {
    const sub = new Subscriber(() => {});
    const it = sub[Symbol.asyncIterator]();
    let got = 0;
    for (let i = 0; i < 600; i++) {
      const next = it.next();
      sub.push({ type: "stdout", data: Buffer.alloc(64 * 1024) });
      const r = await next;
      if (!r.done && "data" in r.value) got += r.value.data.length;
    }
    expect(got).toBe(600 * 64 * 1024);
    expect(sub.droppedBytes).toBe(0);
  });

  it("helper commands' output (job helpers, mv, the VNC helper's errors) keeps only its head", () => {
    const head = new HeadBuffer(64 * 1024);
    for (let i = 0; i < 1000; i++) head.push(Buffer.alloc(64 * 1024, 97));
    expect(head.truncated).toBe(true);
    expect(head.take().length).toBe(64 * 1024);
  });
});
