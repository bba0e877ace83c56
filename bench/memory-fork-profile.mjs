#!/usr/bin/env node
// Where the time of a memory fork goes: one in-process server (warm templates on, the machine's
// default networking), one parent, then `--reps` forks of `--children` memory children, each
// timed from the fork call until every child answered an exec. Beside it: the floor
// (../shared/bench/raw-floor.py, same run), and a profile taken by wrapping the host's classes in
// this process (no change to the product): QemuVm.start, QMP connect and each QMP command, the
// agent's connect (HELLO until answered) and the number of HELLOs sent, the memory image build
// (MemoryImages.ensure), and each child QEMU's CPU time (utime + stime) once it answered.
// Usage: node bench/memory-fork-profile.mjs [--children 16] [--reps 2]. Prints one JSON document.
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { AgentClient, detectAccel } from "@sandtree/host";
import { MemoryImages, QemuVm, QmpClient } from "@sandtree/host/qemu";
import { FrameType } from "@sandtree/protocol";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor } from "./lib/floor.mjs";

const { values } = parseArgs({
  options: { children: { type: "string", default: "16" }, reps: { type: "string", default: "2" } },
});
const N = Number(values.children);
const REPS = Number(values.reps);
const T0 = performance.now();
const now = () => Math.round(performance.now() - T0);
let trace = [];
let hellos = 0;

function wrap(owner, name, label) {
  const orig = owner[name];
  owner[name] = async function (...args) {
    const t = now();
    try {
      return await orig.apply(this, args);
    } finally {
      trace.push({ label: typeof label === "function" ? label(args) : label, t, ms: now() - t });
    }
  };
}
wrap(QemuVm, "start", "QemuVm.start");
wrap(QmpClient, "connect", "qmp.connect");
wrap(AgentClient, "connect", "agent.connect (HELLO answered)");
wrap(QmpClient.prototype, "execute", (a) => `qmp:${a[0]}`);
wrap(MemoryImages.prototype, "ensure", "MemoryImages.ensure");
const sendRaw = AgentClient.prototype.sendRaw;
AgentClient.prototype.sendRaw = function (type, ...rest) {
  if (type === FrameType.HELLO) hellos++;
  return sendRaw.call(this, type, ...rest);
};

/** The server's socket directory for a data dir (as default-host.ts derives it; a machine's is named after it). */
const runRootOf = (dataDir) =>
  path.join(tmpdir(), `sandtree-${createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10)}`);
function qemuCpuMs(dataDir, id) {
  try {
    const pid = readFileSync(path.join(runRootOf(dataDir), `sandtree-${id}`, "qemu.pid"), "utf8").trim();
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) * 10; // clock ticks of 10 ms
  } catch {
    return null;
  }
}

function summary(entries) {
  const by = {};
  for (const e of entries) (by[e.label] ??= []).push(e.ms);
  return Object.fromEntries(
    Object.entries(by)
      .map(([k, ms]) => {
        ms.sort((a, b) => a - b);
        return [k, { n: ms.length, p50: ms[ms.length >> 1], max: ms.at(-1), sum: ms.reduce((x, y) => x + y, 0) }];
      })
      .sort((a, b) => b[1].sum - a[1].sum),
  );
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-memfork-"));
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: true });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const answered = async (id) => (await client.sandboxes.run(id, ["echo", "ready"])).stdout;
const reps = [];
try {
  const seed = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  await client.sandboxes.waitForCreation(seed.id, { intervalMs: 10, timeoutMs: 600_000 });
  await answered(seed.id);
  for (let r = 0; r < REPS; r++) {
    trace = [];
    hellos = 0;
    const t0 = performance.now();
    const { sandboxes } = await client.sandboxes.forkMany(seed.id, N, { memory: true });
    const forkCallMs = Math.round(performance.now() - t0);
    const children = await Promise.all(
      sandboxes.map(async (s) => {
        await client.sandboxes.waitForCreation(s.id, { intervalMs: 10, timeoutMs: 600_000 });
        const running = Math.round(performance.now() - t0);
        await answered(s.id);
        return { running_ms: running, answered_ms: Math.round(performance.now() - t0), qemu_cpu_ms: qemuCpuMs(dataDir, s.id) };
      }),
    );
    const events = JSON.stringify((await client.sandboxes.logs(sandboxes[0].id)).events ?? []);
    reps.push({
      all_answered_ms: Math.round(performance.now() - t0),
      fork_call_ms: forkCallMs,
      ram_image_used: events.includes("copy-on-write RAM image"),
      hellos_sent: hellos,
      children_running_ms: children.map((c) => c.running_ms).sort((a, b) => a - b),
      children_answered_ms: children.map((c) => c.answered_ms).sort((a, b) => a - b),
      child_qemu_cpu_ms: children.map((c) => c.qemu_cpu_ms),
      profile: summary(trace),
    });
    await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
  }
  await client.sandboxes.delete(seed.id);
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
const floorClone = floor.raw_cow_clone_to_first_command_s ? floor.raw_cow_clone_to_first_command_s * 1000 : null;
console.log(
  JSON.stringify(
    {
      bench: "memory-fork-profile",
      accel,
      children: N,
      floor,
      floor_clones_serial_ms: floorClone ? Math.round(floorClone * N) : null,
      all_answered_ms: reps.map((r) => r.all_answered_ms),
      aim_ms: 3000,
      reps,
    },
    null,
    2,
  ),
);
