#!/usr/bin/env node
// Where the time of a warm create goes (#22 item 3): one in-process server (warm templates on,
// the machine's default networking), one seed create (its shape and image templates then build),
// then `--runs` creates of the same image and shape, each timed from the create call to its first
// output (`echo`), as bench/fork.mjs times `warm_create`. Beside it: the floor
// (../shared/bench/raw-floor.py, same run), and a profile taken by wrapping the host's classes and
// the server's store and network service in this process (no change to the product): each call's
// time, summed per create, and the server's own events (created -> image ready -> starting the VM
// -> running) against the client's view (POST answered, RUNNING seen, first output).
// Usage: node bench/warm-create-profile.mjs [--runs 10]. Prints one JSON document.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { AgentClient, detectAccel, QemuVm, QmpClient } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { SqliteStore, startServer } from "@sandtree/server";
import { measureFloor } from "./lib/floor.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
const RUNS = Number(values.runs);
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
let trace = null;

/** Times `owner[name]`'s promises (a synchronous result passes through untimed). */
function wrap(owner, name, label) {
  const orig = owner[name];
  owner[name] = function (...args) {
    const t = performance.now();
    const r = orig.apply(this, args);
    if (!r || typeof r.then !== "function") return r;
    const done = () => trace?.push({ label: typeof label === "function" ? label(args) : label, ms: performance.now() - t });
    return r.finally(done);
  };
}
wrap(QemuVm, "start", "QemuVm.start (spawn -> agent answered)");
wrap(QmpClient, "connect", "qmp.connect");
wrap(AgentClient, "connect", "agent.connect (HELLO answered)");
wrap(QmpClient.prototype, "execute", (a) => `qmp:${a[0]}`);
for (const m of Object.getOwnPropertyNames(SqliteStore.prototype)) {
  if (m !== "constructor" && typeof SqliteStore.prototype[m] === "function") wrap(SqliteStore.prototype, m, `store.${m}`);
}

/** Waits until both templates of this memory size exist: the shape one and the image's own. */
async function templatesBuilt(dataDir, memoryMb) {
  const root = path.join(dataDir, "templates");
  for (let i = 0; i < 1200; i++) {
    const kinds = new Set();
    for (const k of existsSync(root) ? readdirSync(root) : []) {
      const meta = path.join(root, k, "template.json");
      if (!existsSync(meta)) continue;
      const t = JSON.parse(readFileSync(meta, "utf8"));
      if (t.inputs.memoryMb === memoryMb) kinds.add(t.rootWait ? "shape" : "image");
    }
    if (kinds.size >= 2) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error("the templates were never built");
}

const p50 = (xs) => (xs.length ? +[...xs].sort((a, b) => a - b)[xs.length >> 1].toFixed(1) : null);
const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-warmprof-"));
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: true });
const net = server.services.network;
wrap(net, "attach", "network.attach (tap + rules)");
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const runs = [];
try {
  const seed = await client.sandboxes.create(SPEC);
  await client.sandboxes.waitForCreation(seed.id, { intervalMs: 10, timeoutMs: 600_000 });
  await templatesBuilt(dataDir, 256);
  for (let i = 0; i < RUNS; i++) {
    trace = [];
    const wall0 = Date.now();
    const t0 = performance.now();
    const sb = await client.sandboxes.create(SPEC);
    const posted = performance.now() - t0;
    const got = await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10, timeoutMs: 600_000 });
    const running = performance.now() - t0;
    await client.sandboxes.run(sb.id, ["echo", "ready"]);
    const first = performance.now() - t0;
    const calls = trace;
    trace = null;
    const { events } = await client.sandboxes.logs(sb.id);
    const at = (prefix) => {
      const e = events.find((x) => x.message.startsWith(prefix));
      return e ? Date.parse(e.at) - wall0 : null;
    };
    const sums = {};
    for (const c of calls) {
      sums[c.label] ??= { n: 0, ms: 0 };
      sums[c.label].n++;
      sums[c.label].ms += c.ms;
    }
    runs.push({
      start_path: got.start_path,
      client: { post_answered: posted, running_seen: running, first_output: first },
      server_events: {
        created: at("created"),
        image_ready: at("image ready"),
        starting_vm: at("starting the VM"),
        running: at("running"),
      },
      calls: sums,
    });
    await client.sandboxes.delete(sb.id);
  }
  await client.sandboxes.delete(seed.id);
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
const labels = [...new Set(runs.flatMap((r) => Object.keys(r.calls)))];
const perCreate = Object.fromEntries(
  labels
    .map((l) => [l, { n: p50(runs.map((r) => r.calls[l]?.n ?? 0)), ms_p50: p50(runs.map((r) => r.calls[l]?.ms ?? 0)) }])
    .sort((a, b) => b[1].ms_p50 - a[1].ms_p50),
);
const field = (get) => p50(runs.map(get).filter((x) => x !== null));
console.log(
  JSON.stringify(
    {
      bench: "warm-create-profile",
      accel,
      runs: RUNS,
      floor,
      start_paths: [...new Set(runs.map((r) => r.start_path))],
      first_output_ms_p50: field((r) => r.client.first_output),
      floor_cow_clone_ms: floor.raw_cow_clone_to_first_command_s ? floor.raw_cow_clone_to_first_command_s * 1000 : null,
      client_ms_p50: {
        post_answered: field((r) => r.client.post_answered),
        running_seen: field((r) => r.client.running_seen),
        first_output: field((r) => r.client.first_output),
      },
      server_events_ms_p50: {
        created: field((r) => r.server_events.created),
        image_ready: field((r) => r.server_events.image_ready),
        starting_vm: field((r) => r.server_events.starting_vm),
        running: field((r) => r.server_events.running),
      },
      calls_per_create: perCreate,
    },
    null,
    2,
  ),
);
