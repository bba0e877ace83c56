// Exposed ports of a sandbox on a worker, through the control plane: `sandtree serve` (SQLite)
// and one `sandtree worker` with sandbox networks on, in a network namespace of its own (runs as
// root: ip netns), running a real VM with busybox httpd and a busybox nc echo inside. The
// management calls are forwarded and answer URLs on the control plane; `/ports` and `/tcp` on the
// control plane reach the guest through the worker, guarded by the worker's token check.
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type Api, jsonApi, stopChildProcess } from "../helpers.js";
import { createFleetNets, type FleetNets } from "./fleet-netns.js";
import { type ControlPlane, ENV, SMALL, startControlPlane, startWorkerIn, type Worker, waitRunning } from "./worker-harness.js";

const CP_ENV = { ...ENV, SANDTREE_HEARTBEAT_INTERVAL_MS: "1000" };

/** Opens a /tcp tunnel, sends `text`, resolves with what came back (or rejects with the refusal). */
function tcpEcho(url: string, text: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    let got = "";
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no echo of ${text} (got ${JSON.stringify(got)})`));
    }, 30_000);
    ws.on("open", () => ws.send(Buffer.from(text), { binary: true }));
    ws.on("message", (data: Buffer) => {
      got += data.toString("utf8");
      if (got.length >= text.length) {
        clearTimeout(timer);
        ws.close();
        resolve(got);
      }
    });
    ws.on("unexpected-response", (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`refused: ${res.statusCode}`));
      ws.terminate();
    });
    ws.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

describe("fleet: exposed ports of a sandbox on a worker", () => {
  const dirs: string[] = [];
  let nets: FleetNets | null = null;
  let cp: ControlPlane | null = null;
  let worker: Worker | null = null;
  let api: Api;
  let id = "";

  const mkdir = (name: string) => {
    const d = mkdtempSync(path.join(tmpdir(), `sandtree-fp-${name}-`));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    nets = createFleetNets(1);
    const net = nets.nets[0];
    if (!net) throw new Error("no namespace");
    cp = await startControlPlane(mkdir("cp"), { listen: net.hostAddress, env: CP_ENV });
    const key = cp.key;
    api = jsonApi(cp.url, () => key);
    expect((await api("POST", "/v1/hosts/local/cordon")).status).toBe(200);
    const token = readFileSync(path.join(cp.dir, "join-token"), "utf8").trim();
    worker = await startWorkerIn(net.ns, {
      joinUrls: [cp.url],
      token,
      name: "wp",
      dir: mkdir("wp"),
      listen: `${net.address}:0`,
      // Sandbox networks on: inside its own namespace the worker's bridge and rules touch nobody's.
      env: { SANDTREE_NETWORK: "on" },
    });
    const r = await api("POST", "/v1/sandboxes", SMALL);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    id = r.body.id;
    await waitRunning(api, id, { context: () => worker?.output() ?? "" });
    const start = await api("POST", `/v1/sandboxes/${id}/exec`, {
      command:
        "mkdir -p /www/cgi-bin && echo hello-from-the-worker > /www/index.html && " +
        // A CGI that answers the length and MD5 of the body it was sent (its header ends in CRLF: busybox
        // httpd passes a CGI's header on as it is, and a bare LF is not HTTP).
        `printf '%s\\n' '#!/bin/sh' 'printf "Content-Type: text/plain\\r\\n\\r\\n"' 'echo "$REQUEST_METHOD $CONTENT_LENGTH"' 'head -c "$CONTENT_LENGTH" | md5sum' > /www/cgi-bin/sum && ` +
        "chmod +x /www/cgi-bin/sum && busybox httpd -p 8080 -h /www && " +
        "(busybox nc -ll -p 7000 -e cat </dev/null >/dev/null 2>&1 &)",
      timeout_seconds: 20,
    });
    expect(start.body.exit_code, JSON.stringify(start.body)).toBe(0);
  }, 600_000);

  afterAll(async () => {
    if (id) await api("DELETE", `/v1/sandboxes/${id}`).catch(() => {});
    await stopChildProcess(worker?.proc ?? null, "SIGTERM");
    await stopChildProcess(cp?.proc ?? null, "SIGTERM");
    nets?.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 120_000);

  it("exposes, proxies HTTP and TCP with the worker's token check, and unexposes", async () => {
    const cpUrl = cp?.url ?? "";
    const exposed = await api("POST", `/v1/sandboxes/${id}/ports`, { port: 8080 });
    expect(exposed.status, JSON.stringify(exposed.body)).toBe(201);
    // URLs on the control plane's address, not the worker's.
    expect(exposed.body.url).toBe(`${cpUrl}/ports/${id}/8080/`);
    expect(exposed.body.tcp_url).toBe(`${cpUrl.replace(/^http/, "ws")}/tcp/${id}/8080`);
    const token = exposed.body.token as string;
    expect(token).toMatch(/./);
    const listed = await api("GET", `/v1/sandboxes/${id}/ports`);
    expect(listed.body.ports.map((p: { port: number; url: string }) => [p.port, p.url])).toEqual([[8080, exposed.body.url]]);

    // HTTP through the control plane, the token in the query (a cookie comes back) and in a header.
    const page = await fetch(`${exposed.body.url}index.html?sandtree_token=${encodeURIComponent(token)}`);
    expect([page.status, await page.text()]).toEqual([200, "hello-from-the-worker\n"]);
    expect(page.headers.get("set-cookie")).toContain(`sandtree_port_8080=${token}`);
    const viaHeader = await fetch(`${exposed.body.url}index.html`, { headers: { "x-sandtree-token": token } });
    expect(await viaHeader.text()).toBe("hello-from-the-worker\n");
    // A request body streams to the guest through both proxies.
    const body = randomBytes(3 * 1024 * 1024);
    const posted = await fetch(`${exposed.body.url}cgi-bin/sum`, {
      method: "POST",
      body,
      headers: { "x-sandtree-token": token },
    });
    const md5 = createHash("md5").update(body).digest("hex");
    const postedText = await posted.text();
    expect([posted.status, postedText]).toEqual([200, `POST ${body.length}\n${md5}  -\n`]);
    // A wrong or missing token: refused by the worker, whatever the caller's API key.
    const wrong = await fetch(`${exposed.body.url}index.html`, { headers: { "x-sandtree-token": `${token}x` } });
    expect([wrong.status, ((await wrong.json()) as { code: string }).code]).toEqual([401, "PORT_TOKEN_INVALID"]);
    const keyOnly = await fetch(`${exposed.body.url}index.html`, { headers: { authorization: `Bearer ${cp?.key}` } });
    expect(keyOnly.status).toBe(401);

    // Raw TCP over a WebSocket: with the port's token, and with an API key of the team (no exposure needed).
    const tunnel = await api("POST", `/v1/sandboxes/${id}/ports`, { port: 7000 });
    expect(tunnel.status).toBe(201);
    expect(await tcpEcho(`${tunnel.body.tcp_url}?sandtree_token=${tunnel.body.token}`, "ping-through-cp")).toBe(
      "ping-through-cp",
    );
    expect(await tcpEcho(tunnel.body.tcp_url, "by-api-key", { authorization: `Bearer ${cp?.key}` })).toBe("by-api-key");
    await expect(tcpEcho(`${tunnel.body.tcp_url}?sandtree_token=nope`, "x")).rejects.toThrow(/refused: 401/);
    await expect(tcpEcho(tunnel.body.tcp_url, "x", { authorization: "Bearer st_not-a-key" })).rejects.toThrow(/refused: 401/);

    // Idle timeouts run on the control plane too: a way in the worker let through is activity there
    // (last_activity_at is written at most every 5 s: wait that long without any, then try).
    const activity = async () => (await api("GET", `/v1/sandboxes/${id}`)).body.last_activity_at as string | null;
    const before = await activity();
    await new Promise((r) => setTimeout(r, 5_500));
    const refused = await fetch(`${exposed.body.url}index.html`, { headers: { "x-sandtree-token": "wrong" } });
    expect(refused.status).toBe(401);
    await new Promise((r) => setTimeout(r, 500));
    expect(await activity()).toBe(before);
    const used = await fetch(`${exposed.body.url}index.html`, { headers: { "x-sandtree-token": token } });
    expect(await used.text()).toBe("hello-from-the-worker\n");
    await expect.poll(async () => (await activity()) ?? "", { timeout: 10_000 }).not.toBe(before ?? "");

    // Unexposed: the way in answers 404.
    expect((await api("DELETE", `/v1/sandboxes/${id}/ports/8080`)).status).toBe(204);
    const gone = await fetch(`${exposed.body.url}index.html`, { headers: { "x-sandtree-token": token } });
    expect([gone.status, ((await gone.json()) as { code: string }).code]).toEqual([404, "PORT_NOT_FOUND"]);
    const after = await api("GET", `/v1/sandboxes/${id}/ports`);
    expect(after.body.ports.map((p: { port: number }) => p.port)).toEqual([7000]);
  }, 180_000);
});
