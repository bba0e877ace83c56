import { AuthenticationError, NotFoundError, type PtyHandle, SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runCli, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let id: string;
let client: SandtreeClient;

beforeAll(async () => {
  t = await startTestServer();
  client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key, env: {} });
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  expect(r.status).toBe(201);
  id = r.body.id;
  await t.waitRunning(id);
});
afterAll(async () => {
  await t?.close();
});

/** Reads a terminal's output in the background; `until` waits for a pattern in what came since `from`. */
function reader(pty: PtyHandle) {
  const r = {
    text: "",
    done: Promise.resolve(),
    async until(pattern: RegExp | string, from = 0, timeoutMs = 30_000): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const rest = r.text.slice(from);
        const at = typeof pattern === "string" ? rest.indexOf(pattern) : rest.search(pattern);
        if (at >= 0) return from + at;
        if (Date.now() > deadline) throw new Error(`no ${pattern} in terminal output: ${JSON.stringify(rest.slice(-500))}`);
        await new Promise((res) => setTimeout(res, 10));
      }
    },
  };
  r.done = (async () => {
    for await (const chunk of pty.output) r.text += Buffer.from(chunk).toString("utf8");
  })();
  return r;
}

async function processes(): Promise<string> {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "ps -o pid,args" });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.stdout as string;
}

describe("interactive terminals (pty over WebSocket) on a real microVM", () => {
  it("gives the shell a TTY of the requested size that follows resizes, echoes typing, and ends with the exit code", async () => {
    const pty = await client.sandboxes.pty(id, { rows: 30, cols: 100 });
    const out = reader(pty);
    await pty.write("tty; stty size; echo TERM=$TERM\n");
    await out.until(/\/dev\/pts\/\d+\r\n/);
    await out.until("30 100\r\n");
    await out.until("TERM=xterm-256color");
    let mark = out.text.length;
    await pty.resize(40, 120);
    await pty.write("stty size\n");
    await out.until("40 120\r\n", mark);

    // Keystroke echo round trip: one character typed, until the terminal shows it.
    const rtts: number[] = [];
    for (let i = 0; i < 20; i++) {
      mark = out.text.length;
      const t0 = performance.now();
      await pty.write("x");
      await out.until("x", mark);
      rtts.push(performance.now() - t0);
    }
    rtts.sort((a, b) => a - b);
    console.log(`keystroke echo round trip (20 keys): p50 ${rtts[10]?.toFixed(1)} ms, max ${rtts[19]?.toFixed(1)} ms`);
    await pty.write("\x15"); // Ctrl-U: drop the typed x's

    mark = out.text.length;
    await pty.write("echo typed-$((6*7))\n");
    await out.until("echo typed-$((6*7))", mark); // the echo of the input line
    await out.until("typed-42\r\n", mark);

    await pty.write("exit 7\n");
    await expect(pty.wait()).resolves.toEqual({ exit_code: 7, signal: null });
    await out.done;
  });

  it("Ctrl-C (and a SIGINT control message) interrupts the foreground command without ending the shell", async () => {
    const pty = await client.sandboxes.pty(id, { rows: 24, cols: 80 });
    const out = reader(pty);
    const sleeping = async (what: string) => {
      for (let i = 0; !(await processes()).includes(what); i++) {
        expect(i).toBeLessThan(100);
        await new Promise((res) => setTimeout(res, 100));
      }
    };
    await pty.write("sleep 100\n");
    await sleeping("sleep 100");
    let mark = out.text.length;
    await pty.write("\x03");
    await pty.write("echo after-$((1+1))\n");
    await out.until("after-2\r\n", mark, 10_000);
    expect(await processes()).not.toContain("sleep 100");

    await pty.write("sleep 101\n");
    await sleeping("sleep 101");
    await pty.kill("SIGINT"); // to the terminal's foreground group, as if typed
    mark = out.text.length;
    await pty.write("echo status=$?\n");
    await out.until("status=130\r\n", mark, 10_000);
    await pty.write("exit\n");
    expect((await pty.wait()).exit_code).toBe(0); // the status of the last command, echo
  });

  it("closing the socket kills every process of the terminal's session", async () => {
    const pty = await client.sandboxes.pty(id, { command: "sleep 4242 & sleep 4343" });
    for (let i = 0; !/sleep 4242[\s\S]*sleep 4343|sleep 4343[\s\S]*sleep 4242/.test(await processes()); i++) {
      expect(i).toBeLessThan(100);
      await new Promise((res) => setTimeout(res, 100));
    }
    await pty.close();
    let ps = "";
    for (let i = 0; i < 50; i++) {
      ps = await processes();
      if (!ps.includes("sleep 4242") && !ps.includes("sleep 4343")) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(ps).not.toContain("sleep 4");
  });

  it("refuses a wrong key (401), a missing sandbox (404) and a plain GET (400) before upgrading", async () => {
    const bad = new SandtreeClient({ apiUrl: t.url, apiKey: "st_wrong", env: {} });
    await expect(bad.sandboxes.pty(id)).rejects.toBeInstanceOf(AuthenticationError);
    const missing = client.sandboxes.pty("sb_missing");
    await expect(missing).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing).rejects.toMatchObject({ status: 404, code: "SANDBOX_NOT_FOUND" });
    const raw = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${t.url.replace("http", "ws")}/v1/sandboxes/${id}/pty`, {
        headers: { authorization: "Bearer nope" },
      });
      ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.once("open", () => reject(new Error("opened with a wrong key")));
    });
    expect(raw).toBe(401);
    const plain = await t.api("GET", `/v1/sandboxes/${id}/pty`);
    expect(plain.status).toBe(400);
    expect(plain.body.code).toBe("BAD_REQUEST");
  });

  it("accepts the key as a `bearer.<key>` subprotocol (browsers cannot set headers)", async () => {
    const url = `${t.url.replace("http", "ws")}/v1/sandboxes/${id}/pty?command=${encodeURIComponent("echo via-subprotocol")}`;
    const ws = new WebSocket(url, ["sandtree.pty.v1", `bearer.${t.key}`]);
    let text = "";
    const exit = await new Promise<unknown>((resolve, reject) => {
      ws.on("message", (d, binary) => {
        if (binary) text += d.toString();
        else resolve(JSON.parse(d.toString()));
      });
      ws.once("unexpected-response", (_q, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    expect(ws.protocol).toBe("sandtree.pty.v1");
    expect(text).toContain("via-subprotocol");
    expect(exit).toEqual({ type: "exit", exit_code: 0, signal: null });
  });

  it("`sandtree sandbox ssh ID` with piped stdin runs it and exits with the remote code", async () => {
    const res = await runCli(t, ["sandbox", "ssh", id], { stdin: "echo hi-$((2+1)); exit 3\n" });
    expect(res.stderr).toBe("");
    expect(res.code, JSON.stringify(res.stdout)).toBe(3);
    expect(res.stdout).toContain("hi-3\r\n");
  });
});
