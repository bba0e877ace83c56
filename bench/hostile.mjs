#!/usr/bin/env node
// A neighbour's `exec true` round trip while another sandbox plays a hostile agent
// (packages/server/test/hostile/impostor.c, as in the hostile-guest suite), against its quiet
// value and the floor (bare QEMU, no sandtree code: ../shared/bench/raw-floor.py, same run):
//   quiet:   neighbour alone with an idle second sandbox
//   spray:   the impostor holds the agent and writes garbage, unknown frames, a HELLO storm and
//            8 MiB to unread streams, then lets the agent go
//   credit:  output without end to a streaming exec nobody reads, until the host stops the VM
//   stall:   STARTED then silence, until the watchdog (--agent-deadline ms) stops the VM
// Each case also records the server's RSS growth and how the hostile sandbox ended.
// Usage: node bench/hostile.mjs [--samples 40] [--agent-deadline 10000]. Prints one JSON document.
// (SANDTREE_FLOOR_SCRIPT names raw-floor.py where the checkout is not beside ../shared.)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { startServer } from "@sandtree/server";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { stats } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: { samples: { type: "string", default: "40" }, "agent-deadline": { type: "string", default: "10000" } },
});
const SAMPLES = Number(values.samples);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-hostile-"));
const src = fileURLToPath(new URL("../packages/server/test/hostile/impostor.c", import.meta.url));
execFileSync("gcc", ["-static", "-O1", "-o", path.join(work, "impostor"), src]);
const impostor = readFileSync(path.join(work, "impostor"));

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const server = await startServer({
  dataDir: path.join(work, "data"),
  port: 0,
  logger: false,
  network: "off",
  deadlines: { agentMs: Number(values["agent-deadline"]) },
});
const headers = { authorization: `Bearer ${server.firstKey}`, "content-type": "application/json" };
const call = (method, p, body, extra = {}) =>
  fetch(server.url + p, { method, headers: { ...headers, ...extra }, ...(body !== undefined ? { body } : {}) });
const json = async (method, p, body) => (await call(method, p, body === undefined ? undefined : JSON.stringify(body))).json();
const exec = (id, command) => json("POST", `/v1/sandboxes/${id}/exec`, { command });

async function sandbox() {
  const { id } = await json("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  for (;;) {
    const s = await json("GET", `/v1/sandboxes/${id}`);
    if (s.status === "RUNNING") break;
    if (["ERROR", "TERMINATED", "TIMEOUT"].includes(s.status)) throw new Error(`${id}: ${s.status} ${s.error_reason}`);
    await sleep(100);
  }
  await call("PUT", `/v1/sandboxes/${id}/files?path=/tmp/impostor&mode=755`, impostor, {
    "content-type": "application/octet-stream",
  });
  return id;
}

async function launch(id, args) {
  await exec(id, `setsid /tmp/impostor ${args} </dev/null >/dev/null 2>&1 &`);
  if (args === "spray") return;
  for (;;) {
    const text = await call("GET", `/v1/sandboxes/${id}/files?path=/tmp/impostor.probe`, undefined, {})
      .then((r) => r.text())
      .catch(() => "");
    if (text === "impostor") return;
    await sleep(250);
  }
}

/** Neighbour round trips until `done()` (at least `min`, at most `max`). */
async function sample(neighbour, done, min = 5, max = SAMPLES * 10) {
  const xs = [];
  while (xs.length < max && (xs.length < min || !done())) {
    const t0 = performance.now();
    const r = await exec(neighbour, "true");
    if (r.exit_code !== 0) throw new Error(`neighbour: ${JSON.stringify(r)}`);
    xs.push(performance.now() - t0);
  }
  return xs;
}

const rss = () => process.memoryUsage().rss / 2 ** 20;
const out = { accel, samples: SAMPLES, floor, neighbour_exec_true: {}, server_rss_growth_mib: {}, hostile_ended: {} };
try {
  const neighbour = await sandbox();
  const idle = await sandbox();
  await sample(neighbour, () => true, 5); // warm-up
  const quiet = stats(await sample(neighbour, () => false, SAMPLES, SAMPLES));
  out.neighbour_exec_true.quiet = quiet;
  await json("DELETE", `/v1/sandboxes/${idle}`);

  const ended = async (id) => {
    const s = await json("GET", `/v1/sandboxes/${id}`);
    return s.status === "RUNNING" ? null : `${s.status}: ${s.error_reason}`;
  };
  for (const mode of ["spray", "credit", "stall"]) {
    const id = await sandbox();
    const before = rss();
    let over = false;
    let reader = null;
    if (mode === "spray") {
      await launch(id, "spray");
      // Over once the agent is back: a call that waited on the held agent then answers.
      void exec(id, "true").then(() => (over = true));
    } else {
      await launch(id, `serve ${mode}`);
      if (mode === "credit") {
        reader = new AbortController();
        await fetch(`${server.url}/v1/sandboxes/${id}/exec`, {
          method: "POST",
          headers: { ...headers, accept: "application/x-ndjson" },
          body: JSON.stringify({ command: "true" }),
          signal: reader.signal,
        });
      } else void exec(id, "true").catch(() => {});
      const poll = setInterval(() => void ended(id).then((e) => (over = over || e !== null)), 250);
      const xs = await sample(neighbour, () => over);
      clearInterval(poll);
      out.neighbour_exec_true[mode] = {
        ...stats(xs),
        p50_vs_quiet: ratio(stats(xs).p50_ms, quiet.p50_ms),
        p99_vs_quiet: ratio(stats(xs).p99_ms, quiet.p99_ms),
      };
      reader?.abort();
      out.server_rss_growth_mib[mode] = +(rss() - before).toFixed(1);
      out.hostile_ended[mode] = await ended(id);
      await json("DELETE", `/v1/sandboxes/${id}`).catch(() => {});
      continue;
    }
    const xs = await sample(neighbour, () => over);
    out.neighbour_exec_true[mode] = {
      ...stats(xs),
      p50_vs_quiet: ratio(stats(xs).p50_ms, quiet.p50_ms),
      p99_vs_quiet: ratio(stats(xs).p99_ms, quiet.p99_ms),
    };
    out.server_rss_growth_mib[mode] = +(rss() - before).toFixed(1);
    out.hostile_ended[mode] = (await ended(id)) ?? "RUNNING (agent back)";
    await json("DELETE", `/v1/sandboxes/${id}`);
  }
  out.floor_ratio = { quiet_p50_vs_floor_exec_true: ratio(quiet.p50_ms, floor.raw_exec_true_rtt_ms_p50) };
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 2));
