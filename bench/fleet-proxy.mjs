#!/usr/bin/env node
// What forwarding through the control plane costs: one control plane (`startServer`, SQLite) and
// one `sandtree worker` process on loopback, a sandtree/busybox sandbox pinned to each host, the
// same calls through the same API to both, beside the floor (raw-floor.py) measured in this run:
//   exec_true_ms     p50/p90 of buffered `true` round trips (--execs of them)
//   download_mbs     MB/s of a --mib MiB file downloaded (median of --runs)
//   upload_mbs       MB/s of the same uploaded (median of --runs)
// `local`: the sandbox on the control plane's own host; `worker`: on the worker, every call
// forwarded by the control plane. Usage: node bench/fleet-proxy.mjs [--execs 50] [--mib 64] [--runs 3]
// Prints one JSON document.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";

const { execs: EXECS, mib, runs: RUNS } = benchArgs({ execs: 50, mib: 64, runs: 3 });
const BYTES = mib * 1024 * 1024;
const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../packages/cli/dist/main.js");
const ENV = { SANDTREE_NETWORK: "off", SANDTREE_WARM_TEMPLATES: "false", SANDTREE_LOG_LEVEL: "warn" };

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? +s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))].toFixed(2) : null;
};
const mbs = (ms) => +(BYTES / 1024 / 1024 / (ms / 1000)).toFixed(1);

const dirs = [];
const tmp = async (tag) => {
  const d = await mkdtemp(path.join(tmpdir(), `sandtree-bench-${tag}-`));
  dirs.push(d);
  return d;
};
const cp = await startServer({
  dataDir: await tmp("cp"),
  host: "127.0.0.1",
  port: 0,
  logger: false,
  network: "off",
  warmTemplates: false,
});
const key = cp.firstKey;
const api = async (method, p, body, headers = {}) => {
  const res = await fetch(cp.url + p, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    return { status: res.status, body: text };
  }
};

let worker = null;
try {
  const workerDir = await tmp("worker");
  worker = spawn(
    process.execPath,
    [CLI, "worker", "--join", cp.url, "--join-token", cp.services.fleet.joinToken, "--name", "bench-w"].concat([
      "--data-dir",
      workerDir,
      "--listen",
      "127.0.0.1:0",
    ]),
    { env: { ...process.env, ...ENV }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  worker.stdout.on("data", (d) => (out += d));
  worker.stderr.on("data", (d) => (out += d));
  for (const deadline = Date.now() + 120_000; !out.includes("sandboxes served at"); ) {
    if (worker.exitCode !== null || Date.now() > deadline) throw new Error(`the worker did not join:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const ids = {};
  for (const host of ["local", "bench-w"]) {
    const r = await api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.125, disk_size_gb: 1, host });
    if (r.status !== 201) throw new Error(`create on ${host}: ${JSON.stringify(r.body)}`);
    ids[host === "local" ? "local" : "worker"] = r.body.id;
  }
  for (const id of Object.values(ids)) {
    for (;;) {
      const s = (await api("GET", `/v1/sandboxes/${id}`)).body.status;
      if (s === "RUNNING") break;
      if (["ERROR", "TERMINATED", "TIMEOUT"].includes(s)) throw new Error(`${id} ended ${s}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const payload = new Uint8Array(BYTES).map((_, i) => i % 251);
  const result = {};
  // Interleaved, so both see the same load.
  const exec = { local: [], worker: [] };
  for (let i = 0; i < EXECS; i++) {
    for (const [where, id] of Object.entries(ids)) {
      const t0 = performance.now();
      const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command: ["true"] });
      if (r.status !== 200 || r.body.exit_code !== 0) throw new Error(`exec on ${where}: ${JSON.stringify(r.body)}`);
      exec[where].push(performance.now() - t0);
    }
  }
  const up = { local: [], worker: [] };
  const down = { local: [], worker: [] };
  for (let i = 0; i < RUNS; i++) {
    for (const [where, id] of Object.entries(ids)) {
      let t0 = performance.now();
      const w = await api("PUT", `/v1/sandboxes/${id}/files?path=/tmp/bench.bin`, payload, {
        "content-type": "application/octet-stream",
      });
      if (w.status !== 200) throw new Error(`upload on ${where}: ${JSON.stringify(w.body)}`);
      up[where].push(performance.now() - t0);
      t0 = performance.now();
      const res = await fetch(`${cp.url}/v1/sandboxes/${id}/files?path=/tmp/bench.bin`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const got = (await res.arrayBuffer()).byteLength;
      if (got !== BYTES) throw new Error(`download on ${where}: ${got} bytes`);
      down[where].push(performance.now() - t0);
    }
  }
  for (const where of ["local", "worker"]) {
    result[where] = {
      exec_true_ms: { p50: pct(exec[where], 0.5), p90: pct(exec[where], 0.9), n: EXECS },
      upload_mbs: mbs(pct(up[where], 0.5)),
      download_mbs: mbs(pct(down[where], 0.5)),
    };
  }
  for (const id of Object.values(ids)) await api("DELETE", `/v1/sandboxes/${id}`);
  const local = (await api("GET", "/v1/hosts")).body.hosts.find((h) => h.name === "local");
  const floor = await measureFloor(local.capacity.accel);
  console.log(
    JSON.stringify(
      {
        bench: "fleet-proxy",
        accel: floor.accel,
        execs: EXECS,
        file_mib: BYTES / 1024 / 1024,
        ...result,
        worker_vs_local_exec_p50: ratio(result.worker.exec_true_ms.p50, result.local.exec_true_ms.p50),
        floor,
      },
      null,
      2,
    ),
  );
} finally {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((r) => worker.once("exit", r));
    worker.kill("SIGTERM");
    await exited;
  }
  await cp.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
