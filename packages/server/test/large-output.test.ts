import { createWriteStream, existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { EXEC_STREAM_CONTENT_TYPE, ExecStreamDecoder } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";
import { busyboxForFile, type TestServer } from "./helpers.js";

// `SANDTREE_LARGE_OUTPUT_MIB=1024 npx vitest run packages/server/test/large-output.test.ts`
// runs the same checks with 1 GiB (the default keeps CI time reasonable under TCG).
const MiB = 1024 * 1024;
const SIZE = Number(process.env.SANDTREE_LARGE_OUTPUT_MIB ?? 64) * MiB;
const RSS_BUDGET = 150 * MiB;
const CAP = 16 * MiB;

let t: TestServer;
let id: string;

busyboxForFile((started) => ({ t, id } = started));

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Peak RSS growth of this process (the server runs in it) while `fn` runs. */
async function rssGrowth<T>(fn: () => Promise<T>): Promise<{ result: T; growth: number }> {
  gc();
  const base = process.memoryUsage().rss;
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  try {
    const result = await fn();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { result, growth: peak - base };
  } finally {
    clearInterval(timer);
  }
}

const auth = () => ({ authorization: `Bearer ${t.key}` });
// 26 bytes a line: the bytes at any offset are known without keeping them.
const LINE = "abcdefghijklmnopqrstuvwxy\n";
const command = `yes abcdefghijklmnopqrstuvwxy | head -c ${SIZE}`;
const expectedAt = (offset: number, length: number) => {
  let s = "";
  for (let i = offset; i < offset + length; i++) s += LINE[i % LINE.length];
  return s;
};

describe("large outputs", () => {
  it(`a buffered exec printing ${SIZE / MiB} MiB answers the first 16 MiB and keeps the rest readable`, async () => {
    const started = Date.now();
    // The answer goes to a file unparsed: the client shares this process and must not be measured.
    const answer = path.join(t.dataDir, "answer.json");
    const { result: status, growth } = await rssGrowth(async () => {
      const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: JSON.stringify({ command }),
      });
      await pipeline(res.body as unknown as AsyncIterable<Uint8Array>, createWriteStream(answer));
      return res.status;
    });
    const r = { status, body: JSON.parse(readFileSync(answer, "utf8")) };
    const seconds = (Date.now() - started) / 1000;
    console.log(`buffered ${SIZE / MiB} MiB: ${seconds.toFixed(1)} s, peak RSS growth ${(growth / MiB).toFixed(0)} MiB`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ exit_code: 0, stdout_truncated: true, stdout_bytes: SIZE, stdout_spill_truncated: false });
    expect(r.body.stdout.length).toBe(CAP);
    expect(r.body.exec_id).toMatch(/^ex-/);
    expect(growth).toBeLessThan(RSS_BUDGET);

    const base = `${t.url}/v1/sandboxes/${id}/execs/${r.body.exec_id}/output`;
    const tail = await fetch(`${base}?stream=stdout&offset=${SIZE - 40}`, { headers: auth() });
    expect(tail.headers.get("x-sandtree-stream-bytes")).toBe(String(SIZE));
    expect(await tail.text()).toBe(expectedAt(SIZE - 40, 40));
    const mid = await fetch(`${base}?offset=${CAP + 3}&length=100`, { headers: auth() });
    expect(await mid.text()).toBe(expectedAt(CAP + 3, 100));
    const { result: total, growth: readGrowth } = await rssGrowth(async () => {
      const all = await fetch(base, { headers: auth() });
      let n = 0;
      for await (const chunk of all.body as unknown as AsyncIterable<Uint8Array>) n += chunk.length;
      return n;
    });
    expect(total).toBe(SIZE);
    expect(readGrowth).toBeLessThan(RSS_BUDGET);
    const err = await fetch(`${base}?stream=stderr`, { headers: auth() });
    expect(await err.text()).toBe("");
  });

  it(`a streamed (NDJSON) exec printing ${SIZE / MiB} MiB keeps server memory bounded`, async () => {
    const started = Date.now();
    const { result: bytes, growth } = await rssGrowth(async () => {
      const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json", accept: "application/x-ndjson" },
        body: JSON.stringify({ command }),
      });
      const decoder = new TextDecoder();
      let carry = "";
      let n = 0;
      let exit: number | null = null;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        carry += decoder.decode(chunk, { stream: true });
        const lines = carry.split("\n");
        carry = lines.pop() ?? "";
        for (const line of lines) {
          const ev = JSON.parse(line);
          if (ev.type === "stdout") n += Buffer.byteLength(ev.data, "base64");
          else if (ev.type === "exit") exit = ev.exit_code;
        }
      }
      expect(exit).toBe(0);
      return n;
    });
    const seconds = (Date.now() - started) / 1000;
    console.log(`streamed ${SIZE / MiB} MiB: ${seconds.toFixed(1)} s, peak RSS growth ${(growth / MiB).toFixed(0)} MiB`);
    expect(bytes).toBe(SIZE);
    expect(growth).toBeLessThan(RSS_BUDGET);
    const ok = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "echo still-fine" });
    expect(ok.body.stdout).toBe("still-fine\n");
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("RUNNING");
  });

  it(`a streamed (binary) exec printing ${SIZE / MiB} MiB keeps server memory bounded and its bytes in order`, async () => {
    const { result, growth } = await rssGrowth(async () => {
      const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json", accept: EXEC_STREAM_CONTENT_TYPE },
        body: JSON.stringify({ command }),
      });
      const decoder = new ExecStreamDecoder();
      let n = 0;
      let exit: number | null = null;
      let misplaced = 0;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const ev of decoder.push(chunk)) {
          if (ev.type === "stdout") {
            // Each byte is known from its offset: check a few per record without keeping them.
            for (const k of [0, ev.data.length - 1]) {
              if (ev.data.length && ev.data[k] !== LINE.charCodeAt((n + k) % LINE.length)) misplaced++;
            }
            n += ev.data.length;
          } else if (ev.type === "exit") exit = ev.exit_code;
        }
      }
      return { n, exit, misplaced, leftover: decoder.leftover };
    });
    expect(result).toEqual({ n: SIZE, exit: 0, misplaced: 0, leftover: 0 });
    expect(growth).toBeLessThan(RSS_BUDGET);
  });

  it("flags output lost past the spill cap", async () => {
    const exec = t.server.services.exec;
    const cap = exec.spillCapBytes;
    exec.spillCapBytes = MiB;
    try {
      const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "head -c 3000000 /dev/zero; echo e >&2" });
      expect(r.body).toMatchObject({
        stdout_bytes: 3_000_000,
        stdout_truncated: false,
        stdout_spill_truncated: true,
        stderr_spill_truncated: false,
      });
      const out = await fetch(`${t.url}/v1/sandboxes/${id}/execs/${r.body.exec_id}/output?offset=0`, { headers: auth() });
      expect(out.headers.get("x-sandtree-stream-bytes")).toBe(String(MiB));
      expect((await out.arrayBuffer()).byteLength).toBe(MiB);
    } finally {
      exec.spillCapBytes = cap;
    }
  });

  it("answers 404 for unknown execs, 400 for bad ranges, and deletes outputs with the sandbox", async () => {
    const small = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "printf hello" });
    expect(small.body).toMatchObject({ stdout: "hello", stdout_truncated: false, stdout_bytes: 5 });
    const url = `/v1/sandboxes/${id}/execs/${small.body.exec_id}/output`;
    expect((await t.api("GET", `${url}?offset=1&length=3`)).body).toBe("ell");
    expect((await t.api("GET", `/v1/sandboxes/${id}/execs/ex-0000000000000000/output`)).status).toBe(404);
    expect((await t.api("GET", `/v1/sandboxes/${id}/execs/..%2F..%2Fsandtree.db/output`)).status).toBe(404);
    expect((await t.api("GET", `${url}?offset=-1`)).status).toBe(400);
    expect((await t.api("GET", `${url}?stream=stdin`)).status).toBe(400);
    await t.api("DELETE", `/v1/sandboxes/${id}`);
    expect((await t.api("GET", url)).status).toBe(404);
    expect(existsSync(path.join(t.dataDir, "sandboxes", id, "outputs"))).toBe(false);
  });
});
