#!/usr/bin/env node
// Where an idle sandbox's wake-ups come from: one warm busybox sandbox, left idle, traced from
// inside with ftrace (timers, workqueue items, interrupts, softirqs) over --window s, beside its
// QEMU's CPU and per-thread wake-ups (/proc/PID/task/*) over the same window. Prints JSON.
// Usage: node bench/idle-trace.mjs [--window 30] [--no-network]
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

const { values } = parseArgs({
  options: { window: { type: "string", default: "30" }, "no-network": { type: "boolean", default: false } },
});
const WINDOW_S = Number(values.window);
const TICK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const spec = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1, ...(values["no-network"] ? { network: false } : {}) };

function qemuPid(id) {
  const out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
  const line = out.split("\n").find((l) => l.includes(`sandtree-${id}`));
  return line ? Number.parseInt(line, 10) : null;
}
/** Per thread name: context switches (wake-ups) and CPU ticks. */
function threads(pid) {
  const out = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim();
      const st = readFileSync(`/proc/${pid}/task/${t}/status`, "utf8");
      const sw =
        Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(st)?.[1]) +
        Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(st)?.[1]);
      const f = readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8").split(")").at(-1).trim().split(/\s+/);
      const a = (out[comm] ??= { wakeups: 0, ticks: 0 });
      a.wakeups += sw;
      a.ticks += Number(f[11]) + Number(f[12]);
    } catch {}
  }
  return out;
}

const TRACE_ON = [
  "mountpoint -q /sys/kernel/tracing || mount -t tracefs t /sys/kernel/tracing",
  "cd /sys/kernel/tracing && echo 0 > tracing_on && echo > trace && echo 2048 > buffer_size_kb",
  "for e in timer/hrtimer_expire_entry timer/timer_expire_entry irq/irq_handler_entry workqueue/workqueue_execute_start irq/softirq_entry sched/sched_wakeup; do echo 1 > events/$e/enable; done",
  "echo 1 > tracing_on",
].join("; ");
const TRACE_OFF =
  "cd /sys/kernel/tracing && echo 0 > tracing_on && grep -v '^#' trace | sed -E 's/^.*: (hrtimer_expire_entry|timer_expire_entry|irq_handler_entry|workqueue_execute_start|softirq_entry|sched_wakeup): /\\1 /; s/(hr)?timer=[0-9a-fx(_ptrval)]+ //; s/work struct [0-9a-fx(_ptrval)]+: //; s/ now=[0-9]+//; s/ expires=[0-9]+//; s/ baseclk=[0-9]+//; s/ irq=[0-9]+//; s/vec=[0-9]+ //; s/ pid=[0-9]+ prio=[0-9]+ target_cpu=[0-9]+//' | sort | uniq -c | sort -rn | head -30";

const work = mkdtempSync(path.join(tmpdir(), "sandtree-idle-trace-"));
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const made = [];
try {
  // The first creates of a shape boot while its template is built: wait for a warm clone.
  let id = null;
  for (let i = 0; i < 40 && !id; i++) {
    const sb = await client.sandboxes.create(spec);
    made.push(sb.id);
    await client.sandboxes.waitForCreation(sb.id, { timeoutMs: 600_000 });
    const pid = qemuPid(sb.id);
    if (pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("share=off")) id = sb.id;
    else {
      await client.sandboxes.delete(sb.id);
      await sleep(3000);
    }
  }
  if (!id) throw new Error("no warm clone");
  const pid = qemuPid(id);
  await sleep(10_000);
  await client.sandboxes.run(id, ["sh", "-c", TRACE_ON]);
  const irq0 = (await client.sandboxes.run(id, ["cat", "/proc/interrupts"])).stdout;
  const t0 = threads(pid);
  const s0 = performance.now();
  await sleep(WINDOW_S * 1000);
  const secs = (performance.now() - s0) / 1000;
  const t1 = threads(pid);
  const trace = (await client.sandboxes.run(id, ["sh", "-c", TRACE_OFF])).stdout;
  const irq1 = (await client.sandboxes.run(id, ["cat", "/proc/interrupts"])).stdout;
  const perThread = Object.fromEntries(
    Object.entries(t1).map(([k, v]) => [
      k,
      {
        wakeups_per_s: +((v.wakeups - (t0[k]?.wakeups ?? 0)) / secs).toFixed(2),
        cpu_pct: +(((v.ticks - (t0[k]?.ticks ?? 0)) / TICK / secs) * 100).toFixed(3),
      },
    ]),
  );
  const cpuPct = Object.values(perThread).reduce((a, b) => a + b.cpu_pct, 0);
  console.log(
    JSON.stringify(
      {
        bench: "idle-trace",
        window_s: +secs.toFixed(1),
        qemu_cpu_pct_of_core: +cpuPct.toFixed(3),
        qemu_threads: perThread,
        guest_trace_counts: trace
          .trim()
          .split("\n")
          .map((l) => l.trim()),
        guest_interrupts: { before: irq0, after: irq1 },
        load_avg: loadavg(),
        cmdline: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" "),
      },
      null,
      1,
    ),
  );
} finally {
  for (const id of made) await client.sandboxes.delete(id).catch(() => {});
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
