#!/usr/bin/env node
// Starts and forks, each figure beside the floor (bare QEMU, no sandtree code:
// ../shared/bench/raw-floor.py, same run, same accelerator) and beside the same figure with warm
// templates off (SANDTREE_WARM_TEMPLATES=0: every start boots a kernel). One server per mode,
// each on a fresh data dir; the image bases are already converted (setup), so "first create of a
// new image" does not count the conversion.
//   warm_create        create -> first output, the template's shape and image again (p50)
//   new_image_create   the first create of another image (sandtree/debian after busybox)
//   fs_fork            POST fork (checkpoint + child) -> the child's first output (p50)
//   restore            create from a checkpoint -> first output (p50)
//   memory_fork        fork with memory of 1, 4, 16 children -> every child answered
//   reset              reset to a memory checkpoint -> first output (p50)
//   exec_true          `true` round trip through the API (p50 of 30)
//   exec_output        MB/s of `head -c 64M /dev/zero` streamed through the API (beside the bare
//                      virtio-serial port's floor, lib/serial-floor.mjs, same run)
//   upload, download   MB/s of 64 MiB through files.upload / files.download
//   burst              --burst (64) creates of 128 MiB fired at once -> all RUNNING (beside the
//                      same number of bare QEMU clones fired at once: bench/floor-clone-cpu.py)
// In warm mode a create of an image that has its own template clones it (root mounted); every
// other start (another image, a fork, a restore) clones the shape template and mounts its disk;
// memory forks and resets clone the checkpoint's RAM file.
// Usage: node bench/fork.mjs [--runs 5] [--burst 64] [--burst-cold N] [--modes warm,cold].
// Prints one JSON document (and each mode's figures on stderr as it finishes).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { TCG_CPU_MODEL } from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureCloneBurstFloor, measureFloor, ratio } from "./lib/floor.mjs";
import { measureSerialFloor } from "./lib/serial-floor.mjs";
import { templatesBuilt } from "./lib/templates.mjs";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "5" },
    burst: { type: "string", default: "64" },
    // Cold boots of a whole burst can miss the boot deadline on 2 cores: a smaller one for cold mode.
    "burst-cold": { type: "string" },
    modes: { type: "string", default: "warm,cold" },
  },
});
const RUNS = Number(values.runs);
const BURST = Number(values.burst);
const BURST_COLD = Number(values["burst-cold"] ?? values.burst);
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const p50 = (xs) => (xs.length ? +pct(xs, 50).toFixed(1) : null);

/**
 * Where a burst's time went, from each sandbox's own events (server clock, ms): from the burst's
 * first call to its row (the create call), row -> image ready (queued + image), image ready ->
 * "starting the VM" (disk and network), "starting the VM" -> running (the VM's start or clone and
 * the agent's answer); p50 and max of each, and the spread of the VM starts (first to last).
 */
async function burstPhases(client, made, t0) {
  const wall0 = Date.now() - (performance.now() - t0);
  const rows = [];
  for (const sb of made) {
    const { events } = await client.sandboxes.logs(sb.id).catch(() => ({ events: [] }));
    const at = (prefix) => {
      const e = events.find((x) => x.message.startsWith(prefix));
      return e ? Date.parse(e.at) : null;
    };
    const created = at("created");
    const ready = at("image ready") ?? at("disk from checkpoint");
    const starting = at("starting the VM");
    const running = at("running");
    if (created && ready && starting && running) rows.push({ created, ready, starting, running });
  }
  if (rows.length === 0) return null;
  const stat = (xs) => ({ p50: p50(xs), max: xs.length ? Math.round(Math.max(...xs)) : null });
  const starts = rows.map((r) => r.starting);
  return {
    sandboxes: rows.length,
    call_to_row: stat(rows.map((r) => r.created - wall0)),
    row_to_image_ready: stat(rows.map((r) => r.ready - r.created)),
    disk_and_network: stat(rows.map((r) => r.starting - r.ready)),
    vm_start_to_running: stat(rows.map((r) => r.running - r.starting)),
    vm_starts_spread: Math.round(Math.max(...starts) - Math.min(...starts)),
  };
}
const since = (t0) => performance.now() - t0;

const MiB = 1024 * 1024;
const mbs = (bytes, ms) => +(bytes / MiB / (ms / 1000)).toFixed(1);

async function measureMode(mode) {
  const work = mkdtempSync(path.join(tmpdir(), `sandtree-bench-fork-${mode}-`));
  const dataDir = path.join(work, "data");
  const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: mode === "warm" });
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
  const first = async (id) => (await client.sandboxes.run(id, ["echo", "ready"])).stdout;
  const ready = async (id) => {
    await client.sandboxes.waitForCreation(id, { intervalMs: 10, timeoutMs: 600_000 });
    await first(id);
  };
  const out = { start_paths: {} };
  const all = [];
  try {
    // The first start of a shape boots cold (and builds the template in warm mode).
    const seed = await client.sandboxes.create(SPEC);
    all.push(seed.id);
    await ready(seed.id);
    if (mode === "warm") await templatesBuilt(dataDir, 256);

    const warm = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const sb = await client.sandboxes.create(SPEC);
      await ready(sb.id);
      warm.push(since(t0));
      out.start_paths.create = (await client.sandboxes.get(sb.id)).start_path;
      await client.sandboxes.delete(sb.id);
    }
    out.warm_create_ms = p50(warm);

    let t0 = performance.now();
    const deb = await client.sandboxes.create({ image: "sandtree/debian", memory_gb: 0.25, disk_size_gb: 2 });
    await ready(deb.id);
    out.new_image_create_ms = +since(t0).toFixed(1);
    out.start_paths.new_image = (await client.sandboxes.get(deb.id)).start_path;
    await client.sandboxes.delete(deb.id);

    const forks = [];
    const restores = [];
    for (let i = 0; i < RUNS; i++) {
      t0 = performance.now();
      const child = await client.sandboxes.fork(seed.id);
      await ready(child.id);
      forks.push(since(t0));
      out.start_paths.fs_fork = (await client.sandboxes.get(child.id)).start_path;
      await client.sandboxes.delete(child.id);
      t0 = performance.now();
      const r = await client.sandboxes.create({ checkpoint_id: child.source_checkpoint_id, memory_gb: 0.25 });
      await ready(r.id);
      restores.push(since(t0));
      out.start_paths.restore = (await client.sandboxes.get(r.id)).start_path;
      await client.sandboxes.delete(r.id);
    }
    out.fs_fork_ms = p50(forks);
    out.restore_ms = p50(restores);

    const execs = [];
    for (let i = 0; i < 30; i++) {
      t0 = performance.now();
      await client.sandboxes.run(seed.id, ["true"]);
      execs.push(since(t0));
    }
    out.exec_true_ms = p50(execs);

    const BIG = 64 * MiB;
    const outputs = [];
    const ups = [];
    const downs = [];
    const local = path.join(work, "up.bin");
    writeFileSync(local, randomBytes(BIG));
    for (let i = 0; i < 3; i++) {
      t0 = performance.now();
      const h = await client.sandboxes.exec(seed.id, ["sh", "-c", `head -c ${BIG} /dev/zero`]);
      let bytes = 0;
      for await (const chunk of h.stdout) bytes += chunk.length;
      await h.wait();
      if (bytes !== BIG) throw new Error(`exec output: ${bytes} bytes`);
      outputs.push(mbs(BIG, since(t0)));
      t0 = performance.now();
      await client.files.upload(seed.id, local, "/root/up.bin");
      ups.push(mbs(BIG, since(t0)));
      t0 = performance.now();
      await client.files.download(seed.id, "/root/up.bin", path.join(work, "down.bin"));
      downs.push(mbs(BIG, since(t0)));
      rmSync(path.join(work, "down.bin"), { force: true });
    }
    out.exec_output_mb_s = p50(outputs);
    out.upload_mb_s = p50(ups);
    out.download_mb_s = p50(downs);
    await client.sandboxes.run(seed.id, ["rm", "-f", "/root/up.bin"]);

    out.memory_fork_all_answered_ms = {};
    for (const n of [1, 4, 16]) {
      t0 = performance.now();
      const { sandboxes } = await client.sandboxes.forkMany(seed.id, n, { memory: true });
      await Promise.all(sandboxes.map((s) => ready(s.id)));
      out.memory_fork_all_answered_ms[n] = +since(t0).toFixed(1);
      await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
    }

    const ck = await client.checkpoints.waitForCheckpoint((await client.checkpoints.create(seed.id, { includeMemory: true })).id);
    const resets = [];
    for (let i = 0; i < RUNS; i++) {
      t0 = performance.now();
      await client.sandboxes.reset(seed.id, ck.id);
      await first(seed.id);
      resets.push(since(t0));
    }
    out.reset_ms = p50(resets);

    const burstN = mode === "warm" ? BURST : BURST_COLD;
    if (burstN > 0) {
      const small = { ...SPEC, memory_gb: 0.125 };
      // The 128 MiB shape's template (warm mode): one start of it, then wait for the build.
      const pre = await client.sandboxes.create(small);
      await ready(pre.id);
      await client.sandboxes.delete(pre.id);
      if (mode === "warm") await templatesBuilt(dataDir, 128);
      t0 = performance.now();
      const made = await Promise.all(Array.from({ length: burstN }, () => client.sandboxes.create(small)));
      all.push(...made.map((s) => s.id));
      const settled = await Promise.allSettled(
        made.map((s) => client.sandboxes.waitForCreation(s.id, { intervalMs: 50, timeoutMs: 900_000 })),
      );
      const s = since(t0) / 1000;
      const running = settled.filter((r) => r.status === "fulfilled").length;
      out.burst = { count: burstN, running, all_settled_s: +s.toFixed(2), per_second: +(running / s).toFixed(2) };
      const failed = settled.find((r) => r.status === "rejected");
      if (failed) out.burst.first_error = String(failed.reason?.message ?? failed.reason).slice(0, 300);
      out.burst.phases_ms = await burstPhases(client, made, t0).catch((err) => ({ error: String(err?.message ?? err) }));
    }
    return out;
  } catch (err) {
    // What was measured so far still prints.
    out.error = String(err?.message ?? err).slice(0, 500);
    return out;
  } finally {
    for (let i = 0; i < all.length; i += 100) await client.sandboxes.bulkDelete({ ids: all.slice(i, i + 100) }).catch(() => {});
    await server.close();
    rmSync(work, { recursive: true, force: true });
  }
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const serialFloor = await measureSerialFloor(accel);
const burstFloor = BURST > 0 ? await measureCloneBurstFloor(accel, BURST, accel === "kvm" ? "host" : TCG_CPU_MODEL) : null;
const modes = {};
for (const mode of values.modes.split(",")) {
  modes[mode] = await measureMode(mode);
  console.error(JSON.stringify({ mode, ...modes[mode] }));
}
const cloneMs = floor.raw_cow_clone_to_first_command_s * 1000 || null;
const w = modes.warm ?? {};
console.log(
  JSON.stringify(
    {
      bench: "fork",
      accel,
      runs: RUNS,
      floor,
      serial_floor: serialFloor,
      burst_floor: burstFloor,
      warm: w,
      cold: modes.cold ?? null,
      vs_floor: {
        warm_create: { ms: w.warm_create_ms, floor_cow_clone_ms: cloneMs, ratio: ratio(w.warm_create_ms, cloneMs), aim: 2 },
        new_image_create: {
          ms: w.new_image_create_ms,
          ratio_vs_warm_create: ratio(w.new_image_create_ms, w.warm_create_ms),
          aim: 1.5,
        },
        fs_fork: { ms: w.fs_fork_ms, ratio_vs_warm_create: ratio(w.fs_fork_ms, w.warm_create_ms), aim: 1.3 },
        restore: { ms: w.restore_ms, ratio_vs_warm_create: ratio(w.restore_ms, w.warm_create_ms), aim: 1.3 },
        exec_true: {
          ms: w.exec_true_ms,
          floor_bin_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
          ratio: ratio(w.exec_true_ms, floor.raw_exec_true_rtt_ms_p50),
          aim: 2,
        },
        exec_output: { mb_s: w.exec_output_mb_s, floor_serial_out_large_mb_s: serialFloor.out_large_mb_s ?? null },
        upload: { mb_s: w.upload_mb_s, floor_serial_in_mb_s: serialFloor.in_mb_s ?? null },
        download: { mb_s: w.download_mb_s, floor_serial_out_large_mb_s: serialFloor.out_large_mb_s ?? null },
        memory_fork_16_ms: { ms: w.memory_fork_all_answered_ms?.[16], aim_ms: 3000 },
        burst_per_second: {
          value: w.burst?.per_second,
          floor_bare_clones_echoed_per_s: burstFloor?.burst?.echoed_per_s ?? null,
          floor_bare_clones_ran_a_process_per_s: burstFloor?.burst?.ran_a_process_per_s ?? null,
          aim: 10,
        },
      },
    },
    null,
    2,
  ),
);
