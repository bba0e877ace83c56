#!/usr/bin/env node
// The Prime Sandboxes wire API (/prime) through the real prime_sandboxes client, beside the same
// through sandtree's own SDK and the floor (../shared/bench/raw-floor.py), same run, same server:
//   create: create -> first command output (Prime: as wait_for_creation does it, and polled every
//           20 ms like the SDK run; SDK: create, waitForCreation at 20 ms, first command)
//   exec:   `true` round trips: Prime over the Connect command session (`bash -c true`, as the
//           client sends every command), a REST gateway round trip (read-file of one byte), and
//           the SDK's exec of the same `bash -c true`
// Usage: node bench/prime.mjs [--runs 3] [--execs 100]. Prints one JSON document.
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { withBenchServer } from "./lib/bench-server.mjs";
import { compatPython } from "./lib/compat-python.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { pct, stats } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, execs: { type: "string", default: "100" } } });
const RUNS = Number(values.runs);
const EXECS = Number(values.execs);
// The client runs every command under /bin/bash: an image that has it.
const IMAGE = "sandtree/debian";
const HERE = path.dirname(fileURLToPath(import.meta.url));

function primeRun(base, key, home, args) {
  return new Promise((resolve, reject) =>
    execFile(
      compatPython(),
      [path.join(HERE, "prime", "prime_bench.py"), ...args],
      { env: { PATH: process.env.PATH, HOME: home, PRIME_API_BASE_URL: base, PRIME_API_KEY: key }, maxBuffer: 16 << 20 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr.slice(-3000)}`)) : resolve(JSON.parse(stdout.trim().split("\n").at(-1))),
    ),
  );
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
await withBenchServer("sandtree-bench-prime-", { network: "off" }, async ({ server, client, work }) => {
  const prime = (args) => primeRun(`${server.url}/prime`, server.firstKey ?? "", work, args);
  const sdkCreateOnce = async () => {
    const t0 = performance.now();
    const sb = await client.sandboxes.create({ image: IMAGE, memory_gb: 0.5, disk_size_gb: 2 });
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
    const res = await client.sandboxes.run(sb.id, ["/bin/bash", "-c", "echo ready"]);
    if (res.stdout !== "ready\n") throw new Error(`unexpected output ${JSON.stringify(res)}`);
    return { ms: performance.now() - t0, sb };
  };
  // Not measured: the first create builds the warm template every later one clones.
  await client.sandboxes.delete((await sdkCreateOnce()).sb.id);
  const sdkCreate = [];
  const p = { create_to_first_output_wait_for_creation_ms: [], create_to_first_output_polled_ms: [] };
  // Alternated, so drift on a shared machine hits both alike.
  for (let i = 0; i < RUNS; i++) {
    const { ms, sb } = await sdkCreateOnce();
    sdkCreate.push(ms);
    await client.sandboxes.delete(sb.id);
    const r = await prime(["create", IMAGE]);
    p.create_to_first_output_wait_for_creation_ms.push(r.wait_for_creation_ms);
    p.create_to_first_output_polled_ms.push(r.polled_ms);
  }
  const { sb } = await sdkCreateOnce();
  const sdkTrue = [];
  for (let j = 0; j < EXECS; j++) {
    const t = performance.now();
    await client.sandboxes.run(sb.id, ["/bin/bash", "-c", "true"]);
    sdkTrue.push(performance.now() - t);
  }
  await client.sandboxes.delete(sb.id);
  Object.assign(p, await prime(["exec", IMAGE, String(EXECS)]));
  const floorBoot = floor.raw_cold_boot_to_first_command_s ? floor.raw_cold_boot_to_first_command_s * 1000 : null;
  return {
    bench: "prime",
    accel,
    image: IMAGE,
    runs: RUNS,
    execs: EXECS,
    create_to_first_output: {
      prime_wait_for_creation: stats(p.create_to_first_output_wait_for_creation_ms),
      prime_polled_20ms: stats(p.create_to_first_output_polled_ms),
      sdk: stats(sdkCreate),
      floor_cold_boot_to_first_command_ms: floorBoot,
      ratio_p50_prime_polled_vs_sdk: ratio(pct(p.create_to_first_output_polled_ms, 50), pct(sdkCreate, 50)),
      ratio_p50_prime_wait_for_creation_vs_sdk: ratio(pct(p.create_to_first_output_wait_for_creation_ms, 50), pct(sdkCreate, 50)),
      aim_vs_native: 1.2,
    },
    exec_true: {
      prime_connect: stats(p.connect_exec_true_ms),
      prime_rest_gateway_read_file: stats(p.rest_gateway_read_file_ms),
      sdk: stats(sdkTrue),
      floor_exec_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
      ratio_p50_connect_vs_sdk: ratio(pct(p.connect_exec_true_ms, 50), pct(sdkTrue, 50)),
      ratio_p50_rest_gateway_vs_sdk: ratio(pct(p.rest_gateway_read_file_ms, 50), pct(sdkTrue, 50)),
      aim_vs_native: 1.2,
    },
    floor,
  };
});
