#!/usr/bin/env node
// The E2B API against the native one, through the real clients, in the same run, beside the floor
// (bare QEMU, no sandtree code: ../shared/bench/raw-floor.py, same run and accelerator):
//   create: Sandbox.create (e2b SDK) -> first commands.run output   vs   @sandtree/sdk create,
//           waitForCreation, run -> first output
//   exec:   commands.run('true') (e2b SDK)   vs   run() through @sandtree/sdk
// E2B runs every command under `/bin/bash -l -c`, so the native figures are taken for that same
// command line (`native`) and for a plain argv (`native_argv`, what native code would send).
// Usage: node bench/e2b.mjs [--runs 3] [--execs 30]. Prints one JSON document.
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { Sandbox } from "e2b";
import { withBenchServer } from "./lib/bench-server.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { pct, stats } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, execs: { type: "string", default: "30" } } });
const RUNS = Number(values.runs);
const EXECS = Number(values.execs);
/** E2B's commands need bash: the smallest image here that has it. */
const IMAGE = "sandtree/debian";
const BASH = (cmd) => ["/bin/bash", "-l", "-c", cmd];

await withBenchServer("sandtree-bench-e2b-", {}, async ({ server, client }) => {
  const accel = await detectAccel("auto");
  const floor = await measureFloor(accel);
  const e2b = { apiKey: server.firstKey ?? "", apiUrl: `${server.url}/e2b`, sandboxUrl: `${server.url}/e2b` };

  // One of each first (not measured): the image is pulled and any warm template made.
  const warmup = await Sandbox.create(IMAGE, e2b);
  await warmup.commands.run("true");
  await warmup.kill();

  const create = { e2b: [], native: [] };
  const exec = { e2b: [], native: [], native_argv: [] };
  for (let i = 0; i < RUNS; i++) {
    // Alternate the two paths so drift on a shared machine hits both alike.
    let t0 = performance.now();
    const sbx = await Sandbox.create(IMAGE, e2b);
    const r = await sbx.commands.run("echo ready");
    if (r.stdout !== "ready\n") throw new Error(`e2b: unexpected output ${JSON.stringify(r.stdout)}`);
    create.e2b.push(performance.now() - t0);

    t0 = performance.now();
    const sb = await client.sandboxes.create({ image: IMAGE });
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
    const n = await client.sandboxes.run(sb.id, BASH("echo ready"));
    if (n.stdout !== "ready\n") throw new Error(`native: unexpected output ${JSON.stringify(n.stdout)}`);
    create.native.push(performance.now() - t0);

    if (i === RUNS - 1) {
      for (let j = 0; j < EXECS; j++) {
        let t = performance.now();
        await sbx.commands.run("true");
        exec.e2b.push(performance.now() - t);
        t = performance.now();
        await client.sandboxes.run(sb.id, BASH("true"));
        exec.native.push(performance.now() - t);
        t = performance.now();
        await client.sandboxes.run(sb.id, ["true"]);
        exec.native_argv.push(performance.now() - t);
      }
    }
    await sbx.kill();
    await client.sandboxes.delete(sb.id);
  }
  return {
    bench: "e2b",
    accel,
    image: IMAGE,
    runs: RUNS,
    execs: EXECS,
    create_to_first_output: {
      e2b_sdk: stats(create.e2b),
      native_sdk: stats(create.native),
      ratio_p50_e2b_vs_native: ratio(pct(create.e2b, 50), pct(create.native, 50)),
      floor_cold_boot_ms: floor.raw_cold_boot_to_first_command_s * 1000 || null,
      floor_cow_clone_ms: floor.raw_cow_clone_to_first_command_s * 1000 || null,
      aim: 1.2,
    },
    exec_true: {
      e2b_sdk: stats(exec.e2b),
      native_sdk_same_command: stats(exec.native),
      native_sdk_argv: stats(exec.native_argv),
      ratio_p50_e2b_vs_native: ratio(pct(exec.e2b, 50), pct(exec.native, 50)),
      floor_exec_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
      floor_serial_echo_ms: floor.raw_serial_echo_rtt_ms_p50 ?? null,
      aim: 1.2,
    },
    floor,
  };
});
