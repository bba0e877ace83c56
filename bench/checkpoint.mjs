#!/usr/bin/env node
// Checkpoint figures, each against a raw baseline measured in the same run:
//   durable:  POST checkpoint -> DURABLE for 10, 100, 1000 MB of changes   vs   `cp` of a file of
//             the same size on the same disk (plus fsync)
//   fork:     POST fork (of a sandbox with 100 MB of changes) -> the child's first command output
//             vs   POST create -> first command output (a warm create once the first built the template)
//   storage:  stored_bytes of ten near-identical checkpoints vs ten full copies of the disk
//   floor:    bare QEMU (../shared/bench/raw-floor.py, same run and accelerator); a fork's floor
//             is a copy-on-write clone to first command
// Usage: node bench/checkpoint.mjs [--sizes 10,100,1000]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor, ratio } from "./lib/floor.mjs";

const { values } = parseArgs({ options: { sizes: { type: "string", default: "10,100,1000" } } });
const SIZES = values.sizes.split(",").map(Number);
const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-ck-"));
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const ms = (t0) => +(performance.now() - t0).toFixed(1);

async function sandbox(diskGb = 1) {
  const sb = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: diskGb });
  await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
  return sb.id;
}

/** A plain copy of `mb` MB on the data disk, fsynced: the floor for making a layer durable. */
function rawCopyMs(mb) {
  const src = path.join(work, "data", `copy-src-${mb}`);
  execFileSync("dd", ["if=/dev/urandom", `of=${src}`, "bs=1M", `count=${mb}`, "status=none"]);
  execFileSync("sync");
  const t0 = performance.now();
  execFileSync("cp", [src, `${src}.copy`]);
  execFileSync("sync", ["-f", `${src}.copy`]);
  const t = ms(t0);
  rmSync(src);
  rmSync(`${src}.copy`);
  return t;
}

try {
  const out = { bench: "checkpoint", durable: [], fork: null, storage: null };
  const big = await sandbox(3);
  for (const mb of SIZES) {
    // Fresh changes of `mb` MB since the previous checkpoint.
    await client.sandboxes.run(big, `head -c ${mb * 1024 * 1024} /dev/urandom > /root/chg-${mb} && sync`);
    const t0 = performance.now();
    const c = await client.checkpoints.create(big);
    const frozenMs = ms(t0);
    const d = await client.checkpoints.waitForCheckpoint(c.id, { intervalMs: 10, timeoutMs: 600_000 });
    const durableMs = ms(t0);
    const copyMs = rawCopyMs(mb);
    out.durable.push({
      changed_mb: mb,
      frozen_ms: frozenMs,
      durable_ms: durableMs,
      raw_copy_ms: copyMs,
      ratio: +(durableMs / copyMs).toFixed(3),
      stored_bytes: d.stored_bytes,
      aim: 1.5,
    });
  }
  await client.sandboxes.delete(big);

  // Fork of a sandbox with 100 MB of changes vs a create of the same size (warm after the first), three of each, alternating.
  const src = await sandbox(1);
  await client.sandboxes.run(src, "head -c 104857600 /dev/urandom > /root/state && sync");
  const forks = [];
  const creates = [];
  for (let i = 0; i < 3; i++) {
    let t0 = performance.now();
    const child = await client.sandboxes.fork(src, { memoryGb: 0.25 });
    await client.sandboxes.waitForCreation(child.id, { intervalMs: 20 });
    await client.sandboxes.run(child.id, ["true"]);
    forks.push(ms(t0));
    await client.sandboxes.delete(child.id);
    t0 = performance.now();
    const fresh = await sandbox(1);
    await client.sandboxes.run(fresh, ["true"]);
    creates.push(ms(t0));
    await client.sandboxes.delete(fresh);
  }
  const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  out.fork = {
    changed_mb: 100,
    fork_p50_ms: p50(forks),
    create_p50_ms: p50(creates),
    ratio: +(p50(forks) / p50(creates)).toFixed(3),
    floor_cow_clone_ms: floor.raw_cow_clone_to_first_command_s * 1000 || null,
    ratio_vs_floor_clone: ratio(p50(forks), floor.raw_cow_clone_to_first_command_s * 1000),
    forks_ms: forks,
    creates_ms: creates,
    aim: "< 2x warm create",
  };

  // Ten near-identical checkpoints (a few KB differ each time) vs ten full copies of the disk.
  const ids = [];
  for (let i = 0; i < 10; i++) {
    await client.sandboxes.run(src, `echo ${i} > /root/counter && sync`);
    ids.push((await client.checkpoints.waitForCheckpoint((await client.checkpoints.create(src)).id)).stored_bytes);
  }
  const disk = path.join(work, "flat.qcow2");
  const layer = (await client.checkpoints.list(src)).at(-1);
  execFileSync("qemu-img", [
    "convert",
    "-U",
    "-O",
    "qcow2",
    path.join(work, "data", "layers", `live-${src}-${layer.id}.qcow2`),
    disk,
  ]);
  const full = statSync(disk).size;
  const stored = ids.reduce((a, b) => a + b, 0);
  out.storage = {
    checkpoints: 10,
    stored_bytes_total: stored,
    full_copy_bytes_each: full,
    ten_full_copies_bytes: full * 10,
    ratio: +(stored / (full * 10)).toFixed(4),
  };
  await client.sandboxes.delete(src);
  out.accel = accel;
  out.floor = floor;
  console.log(JSON.stringify(out, null, 2));
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
