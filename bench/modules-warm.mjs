#!/usr/bin/env node
// Warm create of sandtree/debian (API call -> first command output) without and with the
// modules disk (#17), in one run: "without" is a hard-linked copy of the cache with
// guest/modules.img left out (same kernel, initramfs and images), so the only difference is the
// disk and init's mounts of it and of cgroup v2. Usage: node bench/modules-warm.mjs [--runs 5].
// Prints one JSON document with the floor (bare QEMU clone) beside it.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { cacheDir, detectAccel } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor, ratio } from "./lib/floor.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const RUNS = Number(values.runs);
const SPEC = { image: "sandtree/debian", memory_gb: 0.5, disk_size_gb: 2 };
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

const withDir = cacheDir();
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-mods-"));
const withoutDir = path.join(work, "cache");
execFileSync("cp", ["-al", withDir, withoutDir]);
rmSync(path.join(withoutDir, "guest", "modules.img"), { force: true });

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const floorCloneMs = floor.raw_cow_clone_to_first_command_s * 1000 || null;

async function measure(dir, tag) {
  process.env.SANDTREE_CACHE_DIR = dir;
  const dataDir = path.join(work, `data-${tag}`);
  const server = await startServer({ dataDir, port: 0, logger: false });
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
  try {
    const cold = await client.sandboxes.create(SPEC); // boots cold; the template is built beside it
    await client.sandboxes.waitForCreation(cold.id);
    const troot = path.join(dataDir, "templates");
    const built = () => existsSync(troot) && readdirSync(troot).some((d) => existsSync(path.join(troot, d, "template.json")));
    for (let i = 0; i < 600 && !built(); i++) await new Promise((r) => setTimeout(r, 500));
    if (!built()) throw new Error("template never built");
    await client.sandboxes.delete(cold.id);
    const ms = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const sb = await client.sandboxes.create(SPEC);
      await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10 });
      await client.sandboxes.run(sb.id, ["echo", "ready"]);
      ms.push(performance.now() - t0);
      await client.sandboxes.delete(sb.id);
    }
    return { n: ms.length, p50_ms: +pct(ms, 50).toFixed(1), max_ms: +Math.max(...ms).toFixed(1) };
  } finally {
    await server.close();
  }
}

const out = { accel, image: SPEC.image, floor };
try {
  out.without_modules_disk = await measure(withoutDir, "without");
  out.with_modules_disk = await measure(withDir, "with");
  out.floor_cow_clone_ms = floorCloneMs;
  out.ratio_p50_with_vs_floor = ratio(out.with_modules_disk.p50_ms, floorCloneMs);
} finally {
  process.env.SANDTREE_CACHE_DIR = withDir;
  rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 2));
