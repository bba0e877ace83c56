#!/usr/bin/env node
// Sandbox networking figures, printed as JSON:
// - HTTP requests/s and latency from inside a sandbox through a tunnel to a host service,
//   against the same client run on the host over loopback, in the same run;
// - what network setup adds to create: call -> first command output on a server with
//   networking on vs one with it off (warm starts both, same image and sizes).
// Everything runs in a network namespace this bench creates (root needed), so the host's own
// network configuration is not touched.
//
// The floor (bare QEMU, ../shared/bench/raw-floor.py, same run) is printed beside: a create's
// floor is a copy-on-write clone to first command.
//
//   node bench/network.mjs [--seconds 10] [--runs 5] [--image sandtree/debian]
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { bridgeApi, serveArgv, waitForApi } from "../scripts/lib/netns-api.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const SECONDS = Number(opt("seconds", "10"));
const RUNS = Number(opt("runs", "5"));
const IMAGE = opt("image", "sandtree/debian");
const { detectAccel } = await import("@sandtree/host");
const { measureFloor } = await import("./lib/floor.mjs");
const floor = await measureFloor(await detectAccel("auto"));
const ns = `stbench-${randomBytes(3).toString("hex")}`;
const children = [];
const dirs = [];

const CLIENT = `
import http.client, json, sys, time
host, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
c = http.client.HTTPConnection(host, port, timeout=10)
lat = []
end = time.time() + secs
start = time.perf_counter()
while time.time() < end:
    t = time.perf_counter(); c.request("GET", "/"); r = c.getresponse(); r.read(); lat.append(time.perf_counter() - t)
wall = time.perf_counter() - start
lat.sort()
# The clock's real step: under TCG a guest's clock can move in whole ticks (4 ms), which makes
# single-request percentiles read 0; the mean (wall / requests, one connection) does not.
step, a = 1.0, time.perf_counter()
for _ in range(200000):
    b = time.perf_counter()
    if b != a:
        step = min(step, b - a); a = b
print(json.dumps({"requests": len(lat), "rps": round(len(lat) / wall, 1), "mean_ms": round(wall / len(lat) * 1000, 3), "p50_ms": round(lat[len(lat) // 2] * 1000, 3), "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 3), "clock_step_ms": round(step * 1000, 3)}))
`;

const TARGET = `require("http").createServer((q, s) => s.end("ok")).listen(0, "127.0.0.1", function () { console.log(this.address().port); });`;

function inNs(cmd, argv, opts = {}) {
  const child = spawn("ip", ["netns", "exec", ns, cmd, ...argv], opts);
  children.push(child);
  return child;
}

function cleanup() {
  for (const c of children) c.kill("SIGTERM");
  try {
    for (const pid of execFileSync("ip", ["netns", "pids", ns]).toString().split(/\s+/).filter(Boolean))
      process.kill(Number(pid), "SIGKILL");
  } catch {}
  try {
    execFileSync("ip", ["netns", "del", ns], { stdio: "ignore" });
  } catch {}
  // Each server's log beside its data dir goes too (fail() has printed it by then).
  for (const d of dirs) for (const p of [d, `${d}.log`]) rmSync(p, { recursive: true, force: true });
}
process.on("exit", cleanup);
function fail(err) {
  console.error(err);
  for (const c of children)
    console.error("child", c.spawnargs.slice(3, 6).join(" ").slice(0, 80), "exit", c.exitCode, c.signalCode);
  for (const d of dirs) {
    try {
      console.error(`--- ${d}/serve.log\n${readFileSync(`${d}.log`, "utf8").slice(-4000)}`);
    } catch (e) {
      console.error("no log", d, e.message);
    }
  }
  process.exit(1);
}
process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);
process.on("SIGINT", () => process.exit(130));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
};

/** A server in the namespace, reached from here through a Unix socket bridge. */
async function startServer(network) {
  const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-bench-net-"));
  dirs.push(dataDir);
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const [cmd, argv] = serveArgv(dataDir, port);
  inNs(cmd, argv, {
    env: {
      ...process.env,
      SANDTREE_NETWORK: network,
      SANDTREE_LOG_LEVEL: "warn",
      SANDTREE_NETWORK_SUBNET: network === "on" ? "10.78.0.0/16" : "10.79.0.0/16",
    },
    stdio: ["ignore", openSync(`${dataDir}.log`, "a"), openSync(`${dataDir}.log`, "a")],
  });
  const { base, listener } = await bridgeApi(inNs, dataDir, port);
  listener.unref();
  const key = await waitForApi(base, dataDir);
  const api = async (method, p, body) => {
    const res = await fetch(base + p, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body && !(body instanceof Uint8Array) ? { "content-type": "application/json" } : {}),
      },
      ...(body ? { body: body instanceof Uint8Array ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) };
    } catch {
      return { status: res.status, body: text };
    }
  };
  return { api };
}

async function createAndFirstOutput(api, body) {
  const t0 = performance.now();
  const r = await api("POST", "/v1/sandboxes", { image: IMAGE, memory_gb: 0.375, ...body });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
  const id = r.body.id;
  for (;;) {
    const s = await api("GET", `/v1/sandboxes/${id}`);
    if (s.body.status === "RUNNING") break;
    if (["ERROR", "TERMINATED", "TIMEOUT"].includes(s.body.status)) throw new Error(`${id}: ${s.body.error_reason}`);
    await sleep(20);
  }
  const e = await api("POST", `/v1/sandboxes/${id}/exec`, { command: ["echo", "hi"] });
  if (e.body.stdout !== "hi\n") throw new Error(`exec: ${JSON.stringify(e.body)}`);
  return { id, ms: performance.now() - t0, startPath: (await api("GET", `/v1/sandboxes/${id}`)).body.start_path };
}

/**
 * Warm create -> first output, alternating between the two servers (so load drifts on this
 * shared machine hit both alike). The first create of each boots cold and builds its template.
 */
async function createTimes(apis) {
  for (const api of apis) {
    const first = await createAndFirstOutput(api, {});
    await api("DELETE", `/v1/sandboxes/${first.id}`);
  }
  const times = apis.map(() => []);
  for (let round = 0; round < RUNS * 3 && times.some((t) => t.length < RUNS); round++) {
    for (const [k, api] of apis.entries()) {
      if (times[k].length >= RUNS) continue;
      const r = await createAndFirstOutput(api, {});
      await api("DELETE", `/v1/sandboxes/${r.id}`);
      if (r.startPath === "warm") times[k].push(r.ms);
      else await sleep(3000); // the template is still being built
    }
  }
  return times;
}

execFileSync("ip", ["netns", "add", ns]);
execFileSync("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
const python = execFileSync("python3", ["-c", "import sys; print(sys.executable)"]).toString().trim();

// The tunnel target: an HTTP server on the namespace's loopback.
const target = inNs(process.execPath, ["-e", TARGET], { stdio: ["ignore", "pipe", "ignore"] });
const targetPort = await new Promise((r) => target.stdout.once("data", (d) => r(Number(String(d).trim()))));

// Host baseline: the same client over loopback, in the same namespace.
const hostRun = JSON.parse(
  execFileSync("ip", ["netns", "exec", ns, python, "-c", CLIENT, "127.0.0.1", String(targetPort), String(SECONDS)]).toString(),
);

const on = await startServer("on");
const c = await on.api("POST", "/v1/sandboxes", { image: IMAGE, memory_gb: 0.375, tunnels: { svc: `127.0.0.1:${targetPort}` } });
if (c.status !== 201) throw new Error(JSON.stringify(c.body));
for (;;) {
  const s = await on.api("GET", `/v1/sandboxes/${c.body.id}`);
  if (s.body.status === "RUNNING") break;
  if (s.body.status === "ERROR") throw new Error(s.body.error_reason);
  await sleep(100);
}
const up = await on.api("PUT", `/v1/sandboxes/${c.body.id}/files?path=/tmp/client.py`, new TextEncoder().encode(CLIENT));
if (up.status >= 300) throw new Error(JSON.stringify(up.body));
const inner = await on.api("POST", `/v1/sandboxes/${c.body.id}/exec`, {
  command: ["python3", "/tmp/client.py", "svc.sandtree.internal", String(targetPort), String(SECONDS)],
  timeout_seconds: SECONDS + 60,
});
const sandboxRun = JSON.parse(inner.body.stdout);
// A loopback client inside the guest: what the guest's own CPU (TCG here) allows without the network.
await on.api("POST", `/v1/sandboxes/${c.body.id}/exec`, {
  command: "cd /tmp && (setsid python3 -m http.server 8099 >/dev/null 2>&1 &)",
});
await sleep(2000);
const guestLoop = await on.api("POST", `/v1/sandboxes/${c.body.id}/exec`, {
  command: ["python3", "/tmp/client.py", "127.0.0.1", "8099", String(SECONDS)],
  timeout_seconds: SECONDS + 60,
});
await on.api("DELETE", `/v1/sandboxes/${c.body.id}`);

const off = await startServer("off");
const [withNet, withoutNet] = await createTimes([on.api, off.api]);

const result = {
  bench: "network",
  image: IMAGE,
  seconds: SECONDS,
  tunnel_http: {
    sandbox_through_tunnel: sandboxRun,
    host_over_loopback: hostRun,
    guest_over_its_own_loopback: guestLoop.status === 200 ? JSON.parse(guestLoop.body.stdout) : null,
    rps_ratio_host_over_sandbox: Math.round((hostRun.rps / sandboxRun.rps) * 100) / 100,
    mean_latency_ratio_sandbox_over_host: Math.round((sandboxRun.mean_ms / hostRun.mean_ms) * 100) / 100,
  },
  create_to_first_output_ms: {
    network_on: { p50: Math.round(pct(withNet, 50)), p99: Math.round(pct(withNet, 99)), runs: withNet.map(Math.round) },
    network_off: { p50: Math.round(pct(withoutNet, 50)), p99: Math.round(pct(withoutNet, 99)), runs: withoutNet.map(Math.round) },
    added_by_network_p50_ms: Math.round(pct(withNet, 50) - pct(withoutNet, 50)),
    floor_cow_clone_ms: floor.raw_cow_clone_to_first_command_s * 1000 || null,
  },
  floor,
};
console.log(JSON.stringify(result, null, 2));
process.exit(0);
