#!/usr/bin/env node
// Where the time of a warm create goes (#22 item 3): one in-process server (warm templates on,
// the machine's default networking), one seed create (its shape and image templates then build),
// then `--runs` creates of the same image and shape, each timed from the create call to its first
// output (`echo`), as bench/fork.mjs times `warm_create`. Beside it: the floor
// (../shared/bench/raw-floor.py, same run), and a profile taken by wrapping the host's classes and
// the server's store and network service in this process (no change to the product): each call's
// time, summed per create, and the server's own events (created -> image ready -> starting the VM
// -> running) against the client's view (POST answered, RUNNING seen, first output).
// `qemu_marks_p50`: the clone's QEMU at QMP ready, after `cont`, at the HELLO's answer and after
// the first and a second exec: when, its CPU time (/proc/PID/stat, 10 ms steps), its minor page
// faults and (TCG) the guest code blocks it has translated (HMP `info jit`). `hello_frames_per_create`:
// HELLOs written per start (more than one: an answer came later than the resend interval).
// `spawns_per_create`: every process the server spawned during a create (qemu-img, setfacl, ip,
// tc, nft, the tap owner's python3, the jail's unshare that becomes QEMU), by program: how many,
// their summed and longest spawn-to-exit time, and when the first started and the last ended
// (ms after the create call); QEMU itself, still running, has `running` counted instead.
// Usage: node bench/warm-create-profile.mjs [--runs 10]. Prints one JSON document; with
// PROFILE_VERBOSE=1 each create's marks and HELLO/ACK times also go to stderr.
import childProcess from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { AgentClient, detectAccel, MachineLimiter, runCommand, tapRateCommands } from "@sandtree/host";
import { QemuVm, QmpClient } from "@sandtree/host/qemu";
import { FrameType } from "@sandtree/protocol";
import { SandtreeClient } from "@sandtree/sdk";
import { SqliteStore, startServer } from "@sandtree/server";
import { measureFloor, privateFloor } from "./lib/floor.mjs";
import { templatesBuilt } from "./lib/templates.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" }, ab: { type: "boolean", default: false } } });
const RUNS = Number(values.runs);
// --ab: creates alternate between A (how main did these steps before: the tap's rate one `ip`/`tc`
// process per line, all before QEMU's launch; a restored guest's HELLO resent after 250 ms) and
// B (the product as built), in one run; `by_variant` gives each side's medians.
const AB = values.ab;
let variant = "B";
const limitTap = MachineLimiter.prototype.limitTap;
let rateDone = Promise.resolve();
MachineLimiter.prototype.limitTap = function (tap, rates, signal) {
  if (variant === "B") return limitTap.call(this, tap, rates, signal);
  rateDone = (async () => {
    const ifb = existsSync(`/sys/class/net/si${tap.slice(2)}`);
    for (const argv of tapRateCommands(tap, rates.netMbit, ifb)) await runCommand(argv);
  })();
  return rateDone;
};
const qemuStart = QemuVm.start;
QemuVm.start = async function (opts) {
  if (variant === "A") await rateDone;
  return qemuStart.call(this, opts);
};
const handshake = AgentClient.prototype.handshake;
AgentClient.prototype.handshake = function (signal, retry) {
  const old = variant === "A" && retry.firstMs > 50 ? { firstMs: 250, maxMs: 1000 } : retry;
  return handshake.call(this, signal, old);
};
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
let trace = null;

/** Times `owner[name]`'s promises (a synchronous result passes through untimed). */
function wrap(owner, name, label) {
  const orig = owner[name];
  owner[name] = function (...args) {
    const t = performance.now();
    const r = orig.apply(this, args);
    if (!r || typeof r.then !== "function") return r;
    const done = () => trace?.calls.push({ label: typeof label === "function" ? label(args) : label, ms: performance.now() - t });
    return r.finally(done);
  };
}
wrap(QemuVm, "start", "QemuVm.start (spawn -> agent answered)");
wrap(QmpClient, "connect", "qmp.connect");
wrap(AgentClient, "connect", "agent.connect (HELLO answered)");
wrap(QmpClient.prototype, "execute", (a) => `qmp:${a[0]}`);

/** CPU time (user + system, ms) and minor page faults QEMU `pid` has had so far, from /proc/PID/stat. */
function procStat(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const v = f.slice(f.lastIndexOf(")") + 2).split(" ");
    // minflt, utime and stime (USER_HZ, 100 per second): fields 10, 14 and 15.
    return { cpu_ms: ((Number(v[11]) + Number(v[12])) * 1000) / 100, minflt: Number(v[7]) };
  } catch {
    return { cpu_ms: null, minflt: null };
  }
}
/**
 * This process's CPU (ms: the server, in process, and this bench's client) and that of its
 * children that exited (the spawned tools; QEMU counts once it exited), from /proc/self/stat.
 * Less bent by a loaded host than wall time: what a create costs, not what it waited for.
 */
function selfCpu() {
  const f = readFileSync("/proc/self/stat", "utf8");
  const v = f
    .slice(f.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number);
  // utime, stime, cutime, cstime: fields 14-17 (USER_HZ, 100 per second).
  return { self_ms: (v[11] + v[12]) * 10, children_ms: (v[13] + v[14]) * 10 };
}
const pidOf = (socketPath) => {
  try {
    return Number(readFileSync(path.join(path.dirname(socketPath), "qemu.pid"), "utf8").trim());
  } catch {
    return null;
  }
};
/** Marks `at` (ms since the create call) and QEMU's CPU time then, once `owner[name]` resolved. */
function mark(owner, name, label, socketOf) {
  const orig = owner[name];
  owner[name] = function (...args) {
    const r = orig.apply(this, args);
    const sock = socketOf(this, args);
    if (!sock || !trace) return r;
    return r.then((v) => {
      const pid = pidOf(sock);
      if (trace && pid) {
        const m = { label, at: performance.now() - trace.t0, ...procStat(pid) };
        trace.marks.push(m);
        // Not awaited: the create goes on as it would without the profile.
        if (label === "hello_answered") trace.pending.push(tbCount(trace.qmp).then((n) => (m.tbs = n)));
      }
      return v;
    });
  };
}
mark(QmpClient, "connect", "qmp_ready", (_t, a) => a[0]);
mark(AgentClient, "connect", "hello_answered", (_t, a) => a[0]);
// The QMP socket of each client, to find its QEMU for the CPU mark after `cont`.
const qmpSock = new WeakMap();
const qmpConnect = QmpClient.connect;
QmpClient.connect = async function (sock, o) {
  const c = await qmpConnect.call(this, sock, o);
  qmpSock.set(c, sock);
  if (trace) trace.qmp = c;
  return c;
};
/** Guest code blocks TCG has translated in this QEMU so far (HMP `info jit`; null under KVM). */
async function tbCount(qmp) {
  if (accel !== "tcg" || !qmp) return null;
  const out = await qmp.execute("human-monitor-command", { "command-line": "info jit" }).catch(() => "");
  const m = /TB count\s+(\d+)/.exec(String(out));
  return m ? Number(m[1]) : null;
}
mark(QmpClient.prototype, "execute", "after_cont", (t, a) => (a[0] === "cont" ? qmpSock.get(t) : null));
// HELLOs written per create, and which one the guest answered (by nonce) and when.
const sendRaw = AgentClient.prototype.sendRaw;
AgentClient.prototype.sendRaw = function (type, stream, payload) {
  if (type === FrameType.HELLO && trace) {
    trace.hellos++;
    trace.helloLog.push({ sent_ms: performance.now() - trace.t0, nonce: payload.subarray(0, 16).toString("hex") });
  }
  return sendRaw.call(this, type, stream, payload);
};
const dispatch = AgentClient.prototype.dispatch;
AgentClient.prototype.dispatch = function (frame) {
  if (trace && frame.stream === 0 && (frame.type === FrameType.HELLO_ACK || frame.type === FrameType.READY)) {
    const nonce = frame.type === FrameType.HELLO_ACK ? frame.payload.subarray(0, 16).toString("hex") : null;
    const which = trace.helloLog.findIndex((h) => h.nonce === nonce);
    trace.helloLog.push({
      got_ms: performance.now() - trace.t0,
      type: frame.type === FrameType.READY ? "READY" : `ACK of #${which + 1}`,
    });
  }
  return dispatch.call(this, frame);
};
// Every child process the server spawns (the host's runCommand and QEMU's launch use spawn):
// its program, and when it started and exited, relative to the create being timed.
const spawnOrig = childProcess.spawn;
childProcess.spawn = function (file, ...rest) {
  const child = spawnOrig.call(this, file, ...rest);
  if (trace) {
    const t = trace;
    const rec = { cmd: path.basename(String(file)), start: performance.now() - t.t0, end: null };
    t.spawns.push(rec);
    child.once("exit", () => (rec.end = performance.now() - t.t0));
  }
  return child;
};
syncBuiltinESMExports();
for (const m of Object.getOwnPropertyNames(SqliteStore.prototype)) {
  if (m !== "constructor" && typeof SqliteStore.prototype[m] === "function") wrap(SqliteStore.prototype, m, `store.${m}`);
}

/** A create's spawns by program: count, summed and longest run (ms), first start and last end. */
function spawnSums(spawns) {
  const by = {};
  for (const s of spawns) {
    const b = (by[s.cmd] ??= { n: 0, ms: 0, max_ms: 0, first_start: s.start, last_end: null, running: 0 });
    b.n++;
    if (s.end === null) {
      b.running++;
      continue;
    }
    b.ms += s.end - s.start;
    b.max_ms = Math.max(b.max_ms, s.end - s.start);
    b.last_end = Math.max(b.last_end ?? 0, s.end);
  }
  return by;
}

const p50 = (xs) => (xs.length ? +[...xs].sort((a, b) => a - b)[xs.length >> 1].toFixed(1) : null);
const accel = await detectAccel("auto");
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-warmprof-"));
const loadBefore = loadavg().map((x) => +x.toFixed(1));
privateFloor(work);
const floor = await measureFloor(accel);
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: true });
const net = server.services.network;
wrap(net, "attach", "network.attach (tap + rules)");
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const runs = [];
try {
  // The seed only queues the template builds: on a host loaded enough that its cold boot misses
  // the start deadline, another try (the seeds' errors are printed to stderr).
  let seed = null;
  for (let i = 0; !seed; i++) {
    const s = await client.sandboxes.create(SPEC);
    try {
      await client.sandboxes.waitForCreation(s.id, { intervalMs: 100, timeoutMs: 600_000 });
      seed = s;
    } catch (err) {
      console.error(`seed create ${i + 1}: ${err}`);
      await client.sandboxes.delete(s.id).catch(() => {});
      if (i === 2) throw err;
    }
  }
  await templatesBuilt(dataDir, 256);
  for (let i = 0; i < RUNS; i++) {
    variant = AB && i % 2 === 0 ? "A" : "B";
    const wall0 = Date.now();
    const cpu0 = selfCpu();
    const t0 = performance.now();
    trace = { t0, calls: [], marks: [], hellos: 0, helloLog: [], pending: [], qmp: null, spawns: [] };
    const sb = await client.sandboxes.create(SPEC);
    const posted = performance.now() - t0;
    const got = await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10, timeoutMs: 600_000 });
    const running = performance.now() - t0;
    await client.sandboxes.run(sb.id, ["echo", "ready"]);
    const first = performance.now() - t0;
    const cpu1 = selfCpu();
    const { calls, marks, hellos, helloLog, qmp, pending, spawns } = trace;
    await Promise.all(pending);
    if (process.env.PROFILE_VERBOSE) console.error(JSON.stringify({ marks, helloLog: helloLog.map(({ nonce, ...h }) => h) }));
    trace = null;
    const { events } = await client.sandboxes.logs(sb.id);
    const pid = Number(/pid (\d+)/.exec(events.find((e) => e.message.startsWith("running"))?.message ?? "")?.[1]);
    if (pid) marks.push({ label: "first_output", at: first, ...procStat(pid), tbs: await tbCount(qmp) });
    // The same exec again: what the first one cost beyond it is the clone's first time through
    // that code (TCG translates it anew in every QEMU process) and its first writes to pages.
    const t1 = performance.now();
    await client.sandboxes.run(sb.id, ["echo", "ready"]);
    if (pid)
      marks.push({ label: "second_output", at: first + performance.now() - t1, ...procStat(pid), tbs: await tbCount(qmp) });
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
      variant,
      start_path: got.start_path,
      client: { post_answered: posted, running_seen: running, first_output: first },
      server_events: {
        created: at("created"),
        image_ready: at("image ready"),
        starting_vm: at("starting the VM"),
        running: at("running"),
      },
      calls: sums,
      marks: Object.fromEntries(marks.map((m) => [m.label, m])),
      hellos,
      spawns: spawnSums(spawns),
      cpu: { server_ms: cpu1.self_ms - cpu0.self_ms, children_ms: cpu1.children_ms - cpu0.children_ms },
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
      load_before: loadBefore,
      load_after: loadavg().map((x) => +x.toFixed(1)),
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
      // A clone's QEMU at each step: when (ms since the create call), its CPU time so far (ms) and its
      // minor page faults so far; second_output: `at` is the second exec's own round trip added to first_output.
      qemu_marks_p50: Object.fromEntries(
        ["qmp_ready", "after_cont", "hello_answered", "first_output", "second_output"].map((l) => [
          l,
          {
            at_ms: field((r) => r.marks[l]?.at ?? null),
            cpu_ms: field((r) => r.marks[l]?.cpu_ms ?? null),
            minflt: field((r) => r.marks[l]?.minflt ?? null),
            tcg_blocks: field((r) => r.marks[l]?.tbs ?? null),
          },
        ]),
      ),
      spawns_per_create_p50: Object.fromEntries(
        [...new Set(runs.flatMap((r) => Object.keys(r.spawns)))].map((c) => [
          c,
          Object.fromEntries(
            ["n", "ms", "max_ms", "first_start", "last_end", "running"].map((k) => [k, field((r) => r.spawns[c]?.[k] ?? null)]),
          ),
        ]),
      ),
      ...(AB
        ? {
            by_variant: Object.fromEntries(
              ["A", "B"].map((v) => {
                const rs = runs.filter((r) => r.variant === v);
                const f = (get) => p50(rs.map(get).filter((x) => x !== null && x !== undefined));
                return [
                  v,
                  {
                    n: rs.length,
                    first_output_ms_p50: f((r) => r.client.first_output),
                    running_seen_ms_p50: f((r) => r.client.running_seen),
                    qmp_ready_ms_p50: f((r) => r.marks.qmp_ready?.at),
                    hello_answered_ms_p50: f((r) => r.marks.hello_answered?.at),
                    hellos_p50: f((r) => r.hellos),
                    server_cpu_ms_p50: f((r) => r.cpu.server_ms),
                    children_cpu_ms_p50: f((r) => r.cpu.children_ms),
                    first_output_ms: rs.map((r) => Math.round(r.client.first_output)),
                  },
                ];
              }),
            ),
          }
        : {}),
      cpu_per_create_ms_p50: { server: field((r) => r.cpu.server_ms), children: field((r) => r.cpu.children_ms) },
      hello_frames_per_create: { p50: field((r) => r.hellos), max: Math.max(...runs.map((r) => r.hellos)) },
      calls_per_create: perCreate,
    },
    null,
    2,
  ),
);
