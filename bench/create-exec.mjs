#!/usr/bin/env node
// Cold create and exec round trip through the API, each against the floor (bare QEMU, no
// sandtree code: ../shared/bench/raw-floor.py, same run, same accelerator) and the project's own
// raw path (its QemuVm and guest agent without the server, labelled project_raw):
//   create: API call -> first command output   vs   floor cold boot to first command, and
//           project_raw: QemuVm.start (same kernel, initramfs, image base) -> first output
//   exec:   `true` round trip through the API   vs   floor serial echo and `/bin/true` round
//           trips, and project_raw: agent ping and agent exec of `true` (no HTTP)
// Usage: node bench/create-exec.mjs [--runs 5] [--execs 200]. Prints one JSON document.
import { parseArgs } from "node:util";
import { detectAccel, ImageStore } from "@sandtree/host";
import { QemuVm } from "@sandtree/host/qemu";
import { withBenchServer } from "./lib/bench-server.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { rawVmOptions } from "./lib/raw-vm.mjs";
import { pct, stats } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" }, execs: { type: "string", default: "200" } } });
const RUNS = Number(values.runs);
const EXECS = Number(values.execs);
const IMAGE = "sandtree/busybox";

async function rawBoot(work, image, accel, i) {
  const options = await rawVmOptions(work, { accel, image, tag: `raw-${i}`, memoryMb: 256, diskBytes: 1024 ** 3 });
  const t0 = performance.now();
  const vm = await QemuVm.start(options);
  const ex = vm.agent.exec({ argv: ["echo", "ready"] });
  for await (const ev of ex.events) if (ev.type === "stdout") break;
  const ms = performance.now() - t0;
  return { vm, ms };
}

// Cold creates: this bench measures the boot path (bench/warm.mjs measures warm clones).
process.env.SANDTREE_WARM_TEMPLATES = "0";
const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
await withBenchServer("sandtree-bench-", {}, async ({ client, work }) => {
  const store = new ImageStore();
  const image = await store.resolve(IMAGE);

  const raw = [];
  const api = [];
  let rawVm = null;
  let out = null;
  for (let i = 0; i < RUNS; i++) {
    // Alternate raw and API runs so drift on a shared machine hits both alike.
    const r = await rawBoot(work, image, accel, i);
    raw.push(r.ms);
    if (i < RUNS - 1) await r.vm.stop();
    else rawVm = r.vm;

    const t0 = performance.now();
    const sb = await client.sandboxes.create({ image: IMAGE, memory_gb: 0.25, disk_size_gb: 1 });
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
    const res = await client.sandboxes.run(sb.id, ["echo", "ready"]);
    if (res.stdout !== "ready\n") throw new Error(`unexpected output ${JSON.stringify(res)}`);
    api.push(performance.now() - t0);
    if (i < RUNS - 1) await client.sandboxes.delete(sb.id);
    else {
      // Exec round trips on the last API sandbox vs the last raw VM.
      const ping = [];
      const rawTrue = [];
      const apiTrue = [];
      for (let j = 0; j < EXECS; j++) {
        let t = performance.now();
        await rawVm.agent.ping();
        ping.push(performance.now() - t);
        t = performance.now();
        const ex = rawVm.agent.exec({ argv: ["true"] });
        await ex.exited;
        rawTrue.push(performance.now() - t);
        t = performance.now();
        await client.sandboxes.run(sb.id, ["true"]);
        apiTrue.push(performance.now() - t);
      }
      await client.sandboxes.delete(sb.id);
      await rawVm.stop();
      out = {
        bench: "create-exec",
        accel,
        image: IMAGE,
        runs: RUNS,
        cold_create: {
          api: stats(api),
          floor_ms: floor.raw_cold_boot_to_first_command_s * 1000 || null,
          project_raw_qemuvm: stats(raw),
          ratio_p50_vs_floor: ratio(pct(api, 50), floor.raw_cold_boot_to_first_command_s * 1000),
          ratio_p50_vs_project_raw: ratio(pct(api, 50), pct(raw, 50)),
          aim: 1.25,
        },
        exec_true: {
          api: stats(apiTrue),
          floor_serial_echo_ms: floor.raw_serial_echo_rtt_ms_p50 ?? null,
          floor_exec_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
          project_raw_agent_ping: stats(ping),
          project_raw_agent_exec_true: stats(rawTrue),
          ratio_p50_vs_floor_exec_true: ratio(pct(apiTrue, 50), floor.raw_exec_true_rtt_ms_p50),
          ratio_p50_vs_project_raw_exec: ratio(pct(apiTrue, 50), pct(rawTrue, 50)),
          aim: 2,
        },
        floor,
      };
    }
  }
  return out;
});
