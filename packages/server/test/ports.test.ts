// Exposed ports: management, the HTTP/WebSocket proxy and the raw TCP tunnel, against real
// HTTP, WebSocket and TCP servers on 127.0.0.1 standing in for a sandbox's guest. No VM: the
// sandboxes are RUNNING rows written to the store, and a connection to one of their ports is
// dialGuestPort's to 127.0.0.1 (what a QEMU machine's connect does at its guest's address), or
// NETWORK_DISABLED for one without a network (as a machine's connect says).
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Duplex } from "node:stream";
import { createQemuHost, dialGuestPort } from "@sandtree/host";
import { ErrorBody, type Sandbox, SandtreeError } from "@sandtree/protocol";
import { SandtreeClient } from "@sandtree/sdk";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { buildApp } from "../src/app.js";
import { SqliteStore } from "../src/index.js";
import { FleetEvents } from "../src/services/fleet/fleet-events.js";
import { FleetService } from "../src/services/fleet/fleet-service.js";
import { RemoteSandboxes } from "../src/services/fleet/remote-sandboxes.js";
import type { ImageResolver } from "../src/services/images/image-resolver.js";
import { systemClock } from "../src/services/metering/clock.js";
import { MeteringService } from "../src/services/metering/metering-service.js";
import { loadPriceTable } from "../src/services/metering/prices.js";
import { PortService } from "../src/services/network/port-service.js";
import type { Logger } from "../src/services/observability/logger.js";
import { AdmissionService } from "../src/services/sandboxes/admission-service.js";
import { BundleVolumes } from "../src/services/sandboxes/bundle-volumes.js";
import { herePlacement } from "../src/services/sandboxes/here-site.js";
import { SandboxService } from "../src/services/sandboxes/sandbox-service.js";
import { TimeoutService } from "../src/services/sandboxes/timeout-service.js";
import type { Services } from "../src/services/services.js";
import { AuthService } from "../src/services/teams/auth-service.js";
import { SecretBox } from "../src/services/teams/secret-box.js";
import { VolumeService } from "../src/services/volumes/volume-service.js";
import { openHostStore, openHostUrls, openVolumeStore } from "../src/store/open-store.js";
import { sandboxRow } from "./store/fixtures.js";

const silent: Logger = { info() {}, warn() {}, error() {} };
const noImages: ImageResolver = {
  async check() {},
  resolve: () => Promise.reject(new Error("no images in this test")),
  async list() {
    return [];
  },
  importLayout: () => Promise.reject(new Error("no images in this test")),
};

let dataDir: string;
let store: SqliteStore;
let ports: PortService;
let app: FastifyInstance;
let base: string;
let key: string;
let otherKey: string;
let teamId: string;
const logLines: string[] = [];
/** Sandboxes that have a network. */
const networked = new Set<string>();
/** Sandboxes whose machine's connections are plain streams (as a remote host's), and how many each opened. */
const plainStreams = new Map<string, number>();

/** The socket behind a Duplex without a socket's own members (setNoDelay, setKeepAlive...), as a remote machine's stream is. */
function plainStream(sock: net.Socket): Duplex {
  const d = new Duplex({
    // As a net.Socket by default and a remote machine's stream: the guest's end ends both ways.
    allowHalfOpen: false,
    read: () => void sock.resume(),
    write: (chunk: Buffer, _enc, cb) => void sock.write(chunk, cb),
    final(cb) {
      sock.end();
      cb();
    },
    destroy(err, cb) {
      sock.destroy();
      cb(err);
    },
  });
  sock.on("data", (c: Buffer) => {
    if (!d.push(c)) sock.pause();
  });
  sock.on("end", () => d.push(null));
  sock.on("error", (err) => d.destroy(err));
  return d;
}

// The "guest": HTTP (echo of method, path, headers and body; /big streams 20 MB), WebSocket echo, TCP echo.
let guest: http.Server;
let guestPort: number;
let tcpEcho: net.Server;
let tcpPort: number;
let closedPort: number;
const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> = [];
/** What the guest's HTTP echo answers (its JSON body, read back through the proxy). */
type Echo = { method: string; url: string; headers: http.IncomingHttpHeaders; bytes: number; sha256: string };
const echoOf = async (r: Response): Promise<Echo> => (await r.json()) as Echo;
const errorOf = async (r: Response): Promise<ErrorBody> => ErrorBody.parse(await r.json());

async function newSandbox(team = teamId, status: Sandbox["status"] = "RUNNING", network = true): Promise<string> {
  const id = `sb-${randomBytes(8).toString("hex")}`;
  const now = new Date().toISOString();
  await store.insertSandbox(
    sandboxRow(team, { id, status, image: "test", disk_size_gb: 1, created_at: now, updated_at: now, started_at: now }),
  );
  if (network) networked.add(id);
  return id;
}

async function api(method: string, p: string, body?: unknown, as = key): Promise<{ status: number; body: any }> {
  const res = await fetch(base + p, {
    method,
    headers: { authorization: `Bearer ${as}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** The status a WebSocket upgrade the server refuses is answered with. */
function refusedUpgrade(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve) => {
    const ws = new WebSocket(url, { headers });
    ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.on("error", () => {});
  });
}

async function expose(id: string, port: number): Promise<{ url: string; token: string; tcp_url: string }> {
  const r = await api("POST", `/v1/sandboxes/${id}/ports`, { port });
  expect(r.status).toBe(201);
  return r.body;
}

const BLOCK = randomBytes(64 * 1024);
/** The same `size` bytes every time, in 64 KiB chunks each stamped with its index (order shows). */
function* chunks(size: number): Generator<Buffer> {
  for (let i = 0, sent = 0; sent < size; i++, sent += BLOCK.length) {
    const chunk = Buffer.from(BLOCK.subarray(0, Math.min(BLOCK.length, size - sent)));
    chunk.writeUInt32BE(i, 0);
    yield chunk;
  }
}
function digestOf(size: number): string {
  const h = createHash("sha256");
  for (const c of chunks(size)) h.update(c);
  return h.digest("hex");
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-ports-"));
  store = new SqliteStore(path.join(dataDir, "sandtree.db"));
  const auth = new AuthService(store);
  key = (await auth.bootstrap()) ?? "";
  teamId = (await store.getTeamByName("default"))?.id ?? "";
  otherKey = await auth.createKey((await store.createTeam("other")).id, false);
  const admission = new AdmissionService(store, new SecretBox(randomBytes(32)));
  const sandboxes = new SandboxService({
    store,
    images: noImages,
    dataDir,
    accel: "tcg",
    guest: { kernel: "", initramfs: "", kernelRelease: "" },
    log: silent,
    admission,
    host: createQemuHost({
      runRoot: path.join(dataDir, "run"),
      logRoot: path.join(dataDir, "machine-logs"),
      layersDir: path.join(dataDir, "layers"),
      volumesDir: path.join(dataDir, "volumes"),
    }),
    placement: herePlacement,
  });
  const timeouts = new TimeoutService({ store, sandboxes, log: silent, intervalMs: 60_000 });
  ports = new PortService(store, sandboxes, {
    hasNetwork: (id) => networked.has(id),
    connect: async (sb, port, opts) => {
      if (!networked.has(sb.id)) throw new SandtreeError("NETWORK_DISABLED", `machine ${sb.id} has no network`);
      const sock = await dialGuestPort("127.0.0.1", port, opts);
      const opened = plainStreams.get(sb.id);
      if (opened === undefined) return sock;
      plainStreams.set(sb.id, opened + 1);
      return plainStream(sock);
    },
  });
  // Only what these routes use; the rest of the app is not exercised here.
  // Sandbox answers carry cost_usd, so the metering service is one of them.
  const metering = new MeteringService(store, systemClock, loadPriceTable(undefined));
  // Every sandbox route asks where its sandbox runs (this host here: no worker has joined).
  const fleet = new FleetService({
    hosts: openHostStore(store),
    urls: openHostUrls(store),
    dataDir,
    log: silent,
    clock: systemClock,
    heartbeatIntervalMs: 5000,
    hostLostAfterMs: 30_000,
    events: new FleetEvents(),
  });
  const remote = new RemoteSandboxes({ fleet, store, log: silent, reachable: () => new Set() });
  // Sandbox answers list their volumes too.
  const volumes = new VolumeService({
    store: openVolumeStore(store),
    hosts: new BundleVolumes(
      () => sandboxes.bundles,
      async (id) => id,
    ),
    limits: (team) => admission.limits(team),
    log: silent,
    mountsSupported: false,
  });
  const services = { auth, sandboxes, timeouts, admission, ports, metering, fleet, remote, volumes } as unknown as Services;
  app = buildApp(services, { logger: { level: "info", stream: { write: (line: string) => logLines.push(line) } } });
  await app.listen({ host: "127.0.0.1", port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  guest = http.createServer((req, res) => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    if (req.url === "/duplex") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.flushHeaders();
      return void req.pipe(res);
    }
    if (req.url === "/big") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const it = chunks(20 * 1024 * 1024);
      const pump = () => {
        for (let n = it.next(); !n.done; n = it.next()) if (!res.write(n.value)) return void res.once("drain", pump);
        res.end();
      };
      return pump();
    }
    const h = createHash("sha256");
    let bytes = 0;
    req.on("data", (d: Buffer) => {
      h.update(d);
      bytes += d.length;
    });
    req.on("end", () => {
      res.setHeader("set-cookie", ["app=1; Path=/"]);
      res.writeHead(200, { "content-type": "application/json", "x-guest": "yes" });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bytes, sha256: h.digest("hex") }));
    });
  });
  const wss = new WebSocketServer({ server: guest });
  wss.on("connection", (ws, req) => {
    ws.send(`hello ${req.url}`);
    ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  await new Promise<void>((r) => guest.listen(0, "127.0.0.1", r));
  guestPort = (guest.address() as AddressInfo).port;
  tcpEcho = net.createServer({ allowHalfOpen: true }, (sock) => sock.pipe(sock));
  await new Promise<void>((r) => tcpEcho.listen(0, "127.0.0.1", r));
  tcpPort = (tcpEcho.address() as AddressInfo).port;
  // A port nobody listens on: bind, note it, close.
  const tmp = net.createServer();
  await new Promise<void>((r) => tmp.listen(0, "127.0.0.1", r));
  closedPort = (tmp.address() as AddressInfo).port;
  await new Promise<void>((r) => tmp.close(() => r()));
});

afterAll(async () => {
  await app?.close();
  guest?.closeAllConnections();
  await new Promise((r) => guest?.close(r));
  await new Promise((r) => tcpEcho?.close(r));
  await store?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("exposing ports", () => {
  it("expose answers the URLs and a token once; list shows no tokens; exposing again rotates the token", async () => {
    const id = await newSandbox();
    const first = await api("POST", `/v1/sandboxes/${id}/ports`, { port: guestPort });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      sandbox_id: id,
      port: guestPort,
      url: `${base}/ports/${id}/${guestPort}/`,
      tcp_url: `${base.replace("http", "ws")}/tcp/${id}/${guestPort}`,
      token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const list = await api("GET", `/v1/sandboxes/${id}/ports`);
    expect(list.status).toBe(200);
    const { token: _shownOnce, ...listed } = first.body;
    expect(list.body.ports).toEqual([listed]);

    const second = await api("POST", `/v1/sandboxes/${id}/ports`, { port: guestPort });
    expect(second.body.token).not.toBe(first.body.token);
    expect(second.body.created_at).toBe(first.body.created_at);
    const old = await fetch(`${first.body.url}x`, { headers: { "x-sandtree-token": first.body.token } });
    expect(old.status).toBe(401);
    expect((await errorOf(old)).code).toBe("PORT_TOKEN_INVALID");
    const fresh = await fetch(`${second.body.url}x`, { headers: { "x-sandtree-token": second.body.token } });
    expect(fresh.status).toBe(200);
    await fresh.arrayBuffer();
  });

  it("validates the port, and refuses ended sandboxes and sandboxes without a network", async () => {
    const id = await newSandbox();
    for (const port of [0, 65536, 1.5, "80"]) {
      const r = await api("POST", `/v1/sandboxes/${id}/ports`, { port });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
    }
    const ended = await newSandbox(teamId, "TERMINATED");
    expect((await api("POST", `/v1/sandboxes/${ended}/ports`, { port: 80 })).body.code).toBe("SANDBOX_NOT_RUNNING");
    const offline = await newSandbox(teamId, "RUNNING", false);
    const r = await api("POST", `/v1/sandboxes/${offline}/ports`, { port: 80 });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("NETWORK_DISABLED");
    expect((await api("GET", `/v1/sandboxes/nope/ports`)).body.code).toBe("SANDBOX_NOT_FOUND");
  });

  it("another team cannot expose, list or unexpose (404 as for a missing sandbox)", async () => {
    const id = await newSandbox();
    await expose(id, guestPort);
    for (const [m, p, body] of [
      ["POST", `/v1/sandboxes/${id}/ports`, { port: 81 }],
      ["GET", `/v1/sandboxes/${id}/ports`, undefined],
      ["DELETE", `/v1/sandboxes/${id}/ports/${guestPort}`, undefined],
    ] as const) {
      const r = await api(m, p, body, otherKey);
      expect(r.status).toBe(404);
      expect(r.body.code).toBe("SANDBOX_NOT_FOUND");
    }
    expect((await api("GET", `/v1/sandboxes/${id}/ports`)).body.ports).toHaveLength(1);
    expect((await api("GET", `/v1/sandboxes/${id}/ports`, undefined, "st_wrong")).status).toBe(401);
  });

  it("unexpose: 204, then the proxy answers 404 PORT_NOT_FOUND; again 404", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    expect((await fetch(`${p.url}`, { headers: { "x-sandtree-token": p.token } })).status).toBe(200);
    expect((await api("DELETE", `/v1/sandboxes/${id}/ports/${guestPort}`)).status).toBe(204);
    const after = await fetch(`${p.url}`, { headers: { "x-sandtree-token": p.token } });
    expect(after.status).toBe(404);
    expect((await errorOf(after)).code).toBe("PORT_NOT_FOUND");
    const again = await api("DELETE", `/v1/sandboxes/${id}/ports/${guestPort}`);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("PORT_NOT_FOUND");
    expect((await api("GET", `/v1/sandboxes/${id}/ports`)).body.ports).toEqual([]);
  });

  it("forget() drops a sandbox's ports; an ended sandbox's ports stop working even before", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    await store.updateSandbox(id, { status: "TERMINATED" });
    const r = await fetch(p.url, { headers: { "x-sandtree-token": p.token } });
    expect(r.status).toBe(404);
    expect((await api("GET", `/v1/sandboxes/${id}/ports`)).body.ports).toEqual([]);
    expect(await store.listExposedPorts(id)).toHaveLength(1);
    await ports.forget(id);
    expect(await store.listExposedPorts(id)).toHaveLength(0);
  });
});

describe("the HTTP proxy", () => {
  it("forwards with the header token: path, query, method, headers, X-Forwarded-*; the token is not forwarded", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const r = await fetch(`${p.url}a/b%20c?x=1&y=%2F`, {
      method: "POST",
      headers: {
        "x-sandtree-token": p.token,
        "content-type": "text/plain",
        "x-custom": "kept",
        cookie: `other=1; sandtree_port_${guestPort}=${p.token}`,
      },
      body: "hello",
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-guest")).toBe("yes");
    const echo = await echoOf(r);
    expect(echo).toMatchObject({ method: "POST", url: "/a/b%20c?x=1&y=%2F", bytes: 5 });
    expect(echo.headers).toMatchObject({
      host: `127.0.0.1:${guestPort}`,
      "x-custom": "kept",
      "x-forwarded-for": "127.0.0.1",
      "x-forwarded-host": new URL(base).host,
      "x-forwarded-proto": "http",
      cookie: "other=1",
    });
    expect(JSON.stringify(echo)).not.toContain(p.token);
    expect(r.headers.get("set-cookie")).toBe("app=1; Path=/");
  });

  it("a query token works, is stripped before forwarding, and sets a cookie that then works alone", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const r = await fetch(`${p.url}page?a=1&sandtree_token=${encodeURIComponent(p.token)}&b=2`);
    expect(r.status).toBe(200);
    const echo = await echoOf(r);
    expect(echo.url).toBe("/page?a=1&b=2");
    expect(JSON.stringify(echo)).not.toContain(p.token);
    const cookies = r.headers.getSetCookie();
    const ours = cookies.find((c) => c.startsWith(`sandtree_port_${guestPort}=`));
    expect(ours).toBe(`sandtree_port_${guestPort}=${p.token}; Path=/ports/${id}/${guestPort}/; HttpOnly; SameSite=Lax`);
    expect(cookies).toContain("app=1; Path=/");
    const next = await fetch(`${p.url}other`, { headers: { cookie: `sandtree_port_${guestPort}=${p.token}` } });
    expect(next.status).toBe(200);
    expect((await echoOf(next)).headers.cookie).toBeUndefined();
    const wrong = await fetch(`${p.url}other`, { headers: { cookie: `sandtree_port_${guestPort}=nope` } });
    expect(wrong.status).toBe(401);
  });

  it("no slash after the port redirects (308) to the proxied root, keeping the query", async () => {
    const id = await newSandbox();
    const r = await fetch(`${base}/ports/${id}/${guestPort}?q=1`, { redirect: "manual" });
    expect(r.status).toBe(308);
    expect(r.headers.get("location")).toBe(`/ports/${id}/${guestPort}/?q=1`);
  });

  it("refuses: missing or wrong token 401, unexposed port 404, nothing listening 502 GUEST_ERROR", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    for (const headers of [{}, { "x-sandtree-token": "wrong" }, { "x-sandtree-token": `${p.token}x` }]) {
      const r = await fetch(p.url, { headers });
      expect(r.status).toBe(401);
      expect(await r.json()).toMatchObject({ code: "PORT_TOKEN_INVALID", request_id: expect.any(String) });
    }
    const un = await fetch(`${base}/ports/${id}/${guestPort + 1}/`, { headers: { "x-sandtree-token": p.token } });
    expect(un.status).toBe(404);
    expect((await errorOf(un)).code).toBe("PORT_NOT_FOUND");
    const other = await newSandbox();
    const forOther = await fetch(`${base}/ports/${other}/${guestPort}/`, { headers: { "x-sandtree-token": p.token } });
    expect(forOther.status).toBe(404);

    const dead = await expose(id, closedPort);
    const r = await fetch(dead.url, { headers: { "x-sandtree-token": dead.token } });
    expect(r.status).toBe(502);
    const body = await errorOf(r);
    expect(body.code).toBe("GUEST_ERROR");
    expect(body.message).toContain(`nothing listens on port ${closedPort}`);
  });

  it("answers 409 NETWORK_DISABLED, as its machine's connect says, for a sandbox without a network", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    networked.delete(id);
    const r = await fetch(p.url, { headers: { "x-sandtree-token": p.token } });
    expect([r.status, (await errorOf(r)).code]).toEqual([409, "NETWORK_DISABLED"]);
    expect(await refusedUpgrade(`${p.url.replace(/^http/, "ws")}chat`, { "x-sandtree-token": p.token })).toBe(409);
    const tunnel = `${base.replace("http", "ws")}/tcp/${id}/${tcpPort}`;
    expect(await refusedUpgrade(tunnel, { authorization: `Bearer ${key}` })).toBe(409);
  });

  it("streams 20 MB up and 20 MB down", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const size = 20 * 1024 * 1024;
    const up = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${p.url}upload`, { method: "PUT", headers: { "x-sandtree-token": p.token } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      const it = chunks(size);
      const pump = () => {
        for (let n = it.next(); !n.done; n = it.next()) if (!req.write(n.value)) return void req.once("drain", pump);
        req.end();
      };
      pump();
    });
    expect(up.status).toBe(200);
    const echo = JSON.parse(up.body);
    expect(echo.bytes).toBe(size);
    expect(echo.headers["transfer-encoding"]).toBe("chunked");
    expect(echo.sha256).toBe(digestOf(size));

    const down = await fetch(`${p.url}big`, { headers: { "x-sandtree-token": p.token } });
    expect(down.status).toBe(200);
    const h = createHash("sha256");
    let bytes = 0;
    for await (const c of down.body as unknown as AsyncIterable<Uint8Array>) {
      h.update(c);
      bytes += c.length;
    }
    expect(bytes).toBe(size);
    expect(h.digest("hex")).toBe(digestOf(size));
  });

  it("is not buffered: each request chunk comes back before the next is sent (full duplex)", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const req = http.request(`${p.url}duplex`, { method: "POST", headers: { "x-sandtree-token": p.token } });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      req.on("response", resolve);
      req.on("error", reject);
      req.flushHeaders();
    });
    expect(res.statusCode).toBe(200);
    for (const word of ["one", "two", "three"]) {
      const back = new Promise<string>((resolve) => res.once("data", (d: Buffer) => resolve(d.toString())));
      req.write(word);
      expect(await back).toBe(word);
    }
    req.end();
    await new Promise((r) => res.on("end", r).resume());
    // Proxied traffic is sandbox activity (idle timeouts).
    expect((await store.getSandbox(id))?.last_activity_at).toEqual(expect.any(String));
  });

  it("HEAD and a JSON body larger than the API's 1 MiB limit go through unparsed", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const head = await fetch(`${p.url}x`, { method: "HEAD", headers: { "x-sandtree-token": p.token } });
    expect(head.status).toBe(200);
    const body = JSON.stringify({ pad: "x".repeat(2 * 1024 * 1024) });
    const r = await fetch(`${p.url}json`, {
      method: "POST",
      headers: { "x-sandtree-token": p.token, "content-type": "application/json" },
      body,
    });
    expect(r.status).toBe(200);
    expect((await echoOf(r)).bytes).toBe(Buffer.byteLength(body));
  });

  it("WebSockets through /ports: header token and query token", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    const wsUrl = p.url.replace(/^http/, "ws");
    for (const [url, headers] of [
      [`${wsUrl}chat?x=1`, { "x-sandtree-token": p.token }],
      [`${wsUrl}chat?x=1&sandtree_token=${encodeURIComponent(p.token)}`, {}],
    ] as const) {
      const ws = new WebSocket(url, { headers });
      const messages: string[] = [];
      const done = new Promise<void>((resolve, reject) => {
        ws.on("message", (d) => {
          messages.push(String(d));
          if (messages.length === 1) ws.send("ping");
          else if (messages.length === 2) ws.send(Buffer.alloc(300_000, 7));
          else {
            expect((d as Buffer).length).toBe(300_000);
            ws.close();
          }
        });
        ws.on("close", () => resolve());
        ws.on("error", reject);
      });
      await done;
      expect(messages.slice(0, 2)).toEqual(["hello /chat?x=1", "ping"]);
    }
    expect(await refusedUpgrade(`${wsUrl}chat`, { "x-sandtree-token": "wrong" })).toBe(401);
  });

  it("never logs a token", async () => {
    const id = await newSandbox();
    const p = await expose(id, guestPort);
    await (await fetch(`${p.url}logged?sandtree_token=${p.token}&k=v`)).arrayBuffer();
    await (await fetch(`${base}/tcp/${id}/${guestPort}?sandtree_token=${p.token}`)).arrayBuffer();
    const all = logLines.join("");
    expect(all).toContain(`/ports/${id}/${guestPort}/logged?k=v`);
    expect(all).toContain(`/tcp/${id}/${guestPort}`);
    expect(all).not.toContain(p.token);
    expect(all).not.toContain(encodeURIComponent(p.token));
  });
});

describe("a machine whose connections are plain streams (a remote host's)", () => {
  it("carries proxied HTTP (one kept-alive stream for requests in turn), a WebSocket and a /tcp tunnel", async () => {
    const id = await newSandbox();
    plainStreams.set(id, 0);
    const p = await expose(id, guestPort);
    for (const path of ["one", "two", "three"]) {
      const r = await fetch(`${p.url}${path}`, { headers: { "x-sandtree-token": p.token } });
      expect([r.status, (await echoOf(r)).url]).toEqual([200, `/${path}`]);
    }
    expect(plainStreams.get(id)).toBe(1);
    const big = await fetch(`${p.url}big`, { headers: { "x-sandtree-token": p.token } });
    expect(Buffer.from(await big.arrayBuffer()).length).toBe(20 * 1024 * 1024);

    // An upgrade gets a stream of its own from the machine, never a dial to an address.
    const before = plainStreams.get(id) ?? 0;
    const ws = new WebSocket(`${p.url.replace(/^http/, "ws")}chat`, { headers: { "x-sandtree-token": p.token } });
    const greeting = await new Promise<string>((resolve, reject) => {
      ws.once("message", (d) => resolve(String(d)));
      ws.once("error", reject);
    });
    ws.close();
    expect(greeting).toBe("hello /chat");
    expect(plainStreams.get(id)).toBe(before + 1);

    const tunnel = new WebSocket(`${base.replace("http", "ws")}/tcp/${id}/${tcpPort}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const sent = randomBytes(2 * 1024 * 1024);
    const echoed = await new Promise<Buffer>((resolve, reject) => {
      const got: Buffer[] = [];
      tunnel.on("open", () => {
        tunnel.send(sent, { binary: true });
        tunnel.send('{"type":"eof"}');
      });
      tunnel.on("message", (d: Buffer) => got.push(d));
      tunnel.on("close", (code) => (code === 1000 ? resolve(Buffer.concat(got)) : reject(new Error(`closed ${code}`))));
      tunnel.on("error", reject);
    });
    expect(echoed.equals(sent)).toBe(true);
  });
});

describe("a /tcp tunnel's close", () => {
  it("is answered at once after the client's EOF ended a write still pending (the guest keeps its end open)", async () => {
    // Writes back what it reads, and never ends its side (its sockets are destroyed at the end).
    const conns = new Set<net.Socket>();
    const open = net.createServer({ allowHalfOpen: true }, (sock) => {
      conns.add(sock);
      sock.on("data", (d) => sock.write(d));
    });
    await new Promise<void>((r) => open.listen(0, "127.0.0.1", r));
    const openPort = (open.address() as AddressInfo).port;
    try {
      const id = await newSandbox();
      plainStreams.set(id, 0);
      const tunnel = new WebSocket(`${base.replace("http", "ws")}/tcp/${id}/${openPort}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const sent = randomBytes(2 * 1024 * 1024);
      const closed = await new Promise<{ code: number; echoed: Buffer }>((resolve, reject) => {
        const got: Buffer[] = [];
        let bytes = 0;
        tunnel.on("open", () => {
          tunnel.send(sent, { binary: true });
          tunnel.send('{"type":"eof"}');
        });
        tunnel.on("message", (d: Buffer) => {
          got.push(d);
          bytes += d.length;
          // Everything came back: the client closes (the guest never will).
          if (bytes === sent.length) tunnel.close(1000, "done");
        });
        // 1000: the server read the client's close frame and answered it (1006: it never did).
        tunnel.on("close", (code) => resolve({ code, echoed: Buffer.concat(got) }));
        tunnel.on("error", reject);
      });
      expect(closed.echoed.equals(sent)).toBe(true);
      expect(closed.code).toBe(1000);
    } finally {
      for (const c of conns) c.destroy();
      await new Promise((r) => open.close(r));
    }
  });
});

describe("raw TCP over /tcp", () => {
  it("the guest's end closes the tunnel (1000) after what it sent, with no end from the client", async () => {
    const bye = net.createServer((sock) => sock.end("bye"));
    await new Promise<void>((r) => bye.listen(0, "127.0.0.1", r));
    const byePort = (bye.address() as AddressInfo).port;
    try {
      for (const plain of [false, true]) {
        const id = await newSandbox();
        if (plain) plainStreams.set(id, 0);
        const ws = new WebSocket(`${base.replace("http", "ws")}/tcp/${id}/${byePort}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        const got: string[] = [];
        ws.on("message", (d) => got.push(String(d)));
        const code = await new Promise<number>((resolve, reject) => {
          ws.on("close", resolve);
          ws.on("error", reject);
        });
        expect({ plain, code, got: got.join("") }).toEqual({ plain, code: 1000, got: "bye" });
      }
    } finally {
      await new Promise((r) => bye.close(r));
    }
  });

  /** One TCP exchange: sends `data`, half-closes, collects everything until the peer closes. */
  function exchange(port: number, data: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ host: "127.0.0.1", port, allowHalfOpen: true });
      const got: Buffer[] = [];
      sock.on("data", (d: Buffer) => got.push(d));
      sock.on("end", () => resolve(Buffer.concat(got)));
      sock.on("error", reject);
      sock.end(data);
    });
  }

  it("portForward (SDK, API key) echoes bytes, 8 MB included, through the WebSocket tunnel", async () => {
    const id = await newSandbox();
    const client = new SandtreeClient({ apiUrl: base, apiKey: key });
    const fwd = await client.sandboxes.portForward(id, tcpPort);
    try {
      expect(fwd.localPort).toBeGreaterThan(0);
      expect((await exchange(fwd.localPort, Buffer.from("hello tcp"))).toString()).toBe("hello tcp");
      const big = randomBytes(8 * 1024 * 1024);
      const [a, b] = await Promise.all([exchange(fwd.localPort, big), exchange(fwd.localPort, Buffer.from("second"))]);
      expect(a.equals(big)).toBe(true);
      expect(b.toString()).toBe("second");
    } finally {
      await fwd.close();
    }
  });

  it("portForward with a port token; a wrong token and an unknown sandbox are refused", async () => {
    const id = await newSandbox();
    const p = await expose(id, tcpPort);
    const client = new SandtreeClient({ apiUrl: base, apiKey: key });
    const fwd = await client.sandboxes.portForward(id, tcpPort, { token: p.token });
    expect((await exchange(fwd.localPort, Buffer.from("with token"))).toString()).toBe("with token");
    await fwd.close();

    const errors: Error[] = [];
    const bad = await client.sandboxes.portForward(id, tcpPort, { token: "wrong", onError: (e) => errors.push(e) });
    await exchange(bad.localPort, Buffer.from("x")).catch(() => {});
    await bad.close();
    expect(errors[0]).toMatchObject({ code: "PORT_TOKEN_INVALID", status: 401 });

    await expect(client.sandboxes.portForward("sb-nope", tcpPort)).rejects.toMatchObject({ code: "SANDBOX_NOT_FOUND" });
    const other = new SandtreeClient({ apiUrl: base, apiKey: otherKey });
    await expect(other.sandboxes.portForward(id, tcpPort)).rejects.toMatchObject({ code: "SANDBOX_NOT_FOUND" });
  });

  it("refusals before the upgrade: not a WebSocket 400, nothing listening 502, no credentials 404/401", async () => {
    const id = await newSandbox();
    const plain = await fetch(`${base}/tcp/${id}/${tcpPort}`, { headers: { authorization: `Bearer ${key}` } });
    expect(plain.status).toBe(400);
    const status = (url: string, headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve) => {
        const ws = new WebSocket(url, { headers });
        ws.on("unexpected-response", (_req, res) => {
          let body = "";
          res.on("data", (d) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on("error", () => {});
      });
    const dead = await status(`${base.replace("http", "ws")}/tcp/${id}/${closedPort}`, { authorization: `Bearer ${key}` });
    expect(dead.status).toBe(502);
    expect(JSON.parse(dead.body)).toMatchObject({ code: "GUEST_ERROR" });
    expect((await status(`${base.replace("http", "ws")}/tcp/${id}/${tcpPort}`, {})).status).toBe(404);
    const p = await expose(id, tcpPort);
    expect((await status(`${base.replace("http", "ws")}/tcp/${id}/${tcpPort}`, {})).status).toBe(401);
    const ok = new WebSocket(`${base.replace("http", "ws")}/tcp/${id}/${tcpPort}?sandtree_token=${p.token}`);
    await new Promise<void>((resolve, reject) => {
      ok.on("open", () => ok.send(Buffer.from("raw")));
      ok.on("message", (d) => {
        expect(String(d)).toBe("raw");
        ok.close();
        resolve();
      });
      ok.on("error", reject);
    });
  });
});
