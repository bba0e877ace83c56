#!/usr/bin/env node
import { execFileSync, spawnSync } from "node:child_process";
// Warm starts and memory snapshots, each against the floor (bare QEMU, no sandtree code:
// ../shared/bench/raw-floor.py, same run, same accelerator) and the project's own raw path
// (QemuVm and the agent without the server, labelled project_raw):
//   warm create (API call -> first command output)     vs  floor copy-on-write clone; project_raw:
//                                                          QemuVm.start restoring the same template
//   memory fork of 1, 2, 4, 8 children (call -> every child answered)  vs  N floor clones
//   episode reset (call -> first command output)        vs  floor full restore; project_raw:
//                                                          QemuVm.start restoring the same state
//   density: idle 256 MiB sandboxes started until the host has 2 GiB left (or --density N),
//            with PSS per sandbox
// Usage: node bench/warm.mjs [--runs 10] [--density 40]. Prints one JSON document.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel, guestArtifacts } from "@sandtree/host";
import { createOverlay, QemuVm } from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor, ratio } from "./lib/floor.mjs";

const { values } = parseArgs({
  options: { runs: { type: "string", default: "10" }, density: { type: "string", default: "40" } },
});
const RUNS = Number(values.runs);
const DENSITY_MAX = Number(values.density);
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => ({ n: xs.length, p50_ms: +pct(xs, 50).toFixed(1), p99_ms: +pct(xs, 99).toFixed(1) });
/** The API's samples beside the floor's figure and the project's raw path, named as each figure is, with the aim. */
const versusFloor = (api, [floorName, floorMs], [rawName, raw], aim) => ({
  api: stats(api),
  [floorName]: floorMs,
  [rawName]: stats(raw),
  ratio_p50_vs_floor: ratio(pct(api, 50), floorMs),
  ratio_p50_vs_project_raw: ratio(pct(api, 50), pct(raw, 50)),
  aim,
});
const memAvailableKb = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);
const pssKb = (pid) => Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-warm-"));
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, port: 0, logger: false });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const guest = guestArtifacts();
const first = async (id) => (await client.sandboxes.run(id, ["echo", "ready"])).stdout;

// The server's templates and memory states carry a NIC when it gives sandboxes networks; a
// restore needs the same devices, so the raw path gets a tap of its own (no rules, no traffic).
const RAW_TAP = "sbraw0";
let rawTap = false;
function ensureRawTap() {
  if (rawTap) return;
  spawnSync("ip", ["link", "del", RAW_TAP]); // a run killed before its cleanup
  execFileSync("ip", ["tuntap", "add", "dev", RAW_TAP, "mode", "tap"]);
  rawTap = true;
}

async function rawRestore(tag, opts) {
  if (opts.nic) ensureRawTap();
  const layers = path.join(dataDir, "layers");
  const disk = path.join(layers, `bench-${tag}.qcow2`);
  await createOverlay(opts.backing, disk, 1024 ** 3);
  const t0 = performance.now();
  const vm = await QemuVm.start({
    name: `bench-${tag}`,
    accel,
    ...(opts.nic ? { tap: RAW_TAP } : {}),
    cpuCores: 1,
    memoryMb: 256,
    kernel: guest.kernel,
    initramfs: guest.initramfs,
    rootDisk: disk,
    runDir: path.join(work, `r-${tag}`),
    logDir: path.join(work, `l-${tag}`),
    restoreFrom: opts.state,
    // A template's clone mounts its own disk (the template waits for its root).
    ...(opts.ram ? { memoryFile: { path: opts.ram, share: false }, rootWait: true } : {}),
  });
  for await (const ev of vm.agent.exec({ argv: ["echo", "ready"] }).events) if (ev.type === "stdout") break;
  const ms = performance.now() - t0;
  await vm.stop({ graceMs: 0 });
  rmSync(disk, { force: true });
  return ms;
}

const all = [];
try {
  const out = { bench: "warm" };
  // The first create boots cold and builds the template.
  const cold = await client.sandboxes.create(SPEC);
  all.push(cold.id);
  await client.sandboxes.waitForCreation(cold.id);
  const troot = path.join(dataDir, "templates");
  let tmpl = null;
  for (let i = 0; i < 600 && !tmpl; i++) {
    const k = existsSync(troot) ? readdirSync(troot).find((d) => existsSync(path.join(troot, d, "template.json"))) : undefined;
    if (k) tmpl = JSON.parse(readFileSync(path.join(troot, k, "template.json"), "utf8"));
    else await new Promise((r) => setTimeout(r, 500));
  }
  if (!tmpl) throw new Error("template never built");
  // The seed's image base (a link in layers/): the raw clones' disks sit on it as the server's do.
  const imageBase = readdirSync(path.join(dataDir, "layers")).find((f) => f.startsWith("base-"));

  const warm = [];
  const raw = [];
  for (let i = 0; i < RUNS; i++) {
    raw.push(
      await rawRestore(`clone${i}`, { backing: imageBase, state: tmpl.stateFile, ram: tmpl.ramFile, nic: tmpl.inputs?.nic }),
    );
    const t0 = performance.now();
    const sb = await client.sandboxes.create(SPEC);
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10 });
    await first(sb.id);
    warm.push(performance.now() - t0);
    await client.sandboxes.delete(sb.id);
  }
  const floorCloneMs = floor.raw_cow_clone_to_first_command_s * 1000 || null;
  out.warm_create = versusFloor(warm, ["floor_cow_clone_ms", floorCloneMs], ["project_raw_clone", raw], 1.3);

  // Memory forks of a parent with a process running.
  const parent = await client.sandboxes.create(SPEC);
  all.push(parent.id);
  await client.sandboxes.waitForCreation(parent.id);
  await client.sandboxes.jobs.start(parent.id, "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done");
  out.memory_fork = [];
  for (const n of [1, 2, 4, 8]) {
    const t0 = performance.now();
    const { sandboxes } = await client.sandboxes.forkMany(parent.id, n, { memory: true });
    await Promise.all(
      sandboxes.map(async (s) => {
        await client.sandboxes.waitForCreation(s.id, { intervalMs: 20 });
        await first(s.id);
      }),
    );
    const allMs = +(performance.now() - t0).toFixed(1);
    // The floor for n children: n copy-on-write clones one after another (2 cores: no parallel floor).
    out.memory_fork.push({
      children: n,
      all_answered_ms: allMs,
      floor_n_clones_ms: floorCloneMs && +(n * floorCloneMs).toFixed(1),
    });
    await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
  }

  // Episode reset vs a raw restore of the same memory state.
  const ck = await client.checkpoints.waitForCheckpoint((await client.checkpoints.create(parent.id, { includeMemory: true })).id);
  const db = (await import("better-sqlite3")).default(path.join(dataDir, "sandtree.db"), { readonly: true });
  const row = db.prepare("SELECT blob_key, mem_key FROM checkpoints WHERE id = ?").get(ck.id);
  db.close();
  const parentNic = server.services.network.enabled;
  const resets = [];
  const rawResets = [];
  for (let i = 0; i < RUNS; i++) {
    rawResets.push(
      await rawRestore(`restore${i}`, {
        backing: row.blob_key,
        state: path.join(dataDir, "layers", row.mem_key),
        nic: parentNic,
      }),
    );
    const t0 = performance.now();
    await client.sandboxes.reset(parent.id, ck.id);
    await first(parent.id);
    resets.push(performance.now() - t0);
  }
  const floorRestoreMs = floor.raw_full_restore_to_first_command_s * 1000 || null;
  out.reset = versusFloor(resets, ["floor_full_restore_ms", floorRestoreMs], ["project_raw_restore", rawResets], 1.5);

  // Density: idle warm 256 MiB sandboxes until 2 GiB are left or the cap is reached.
  const dense = [];
  const floorKb = 2 * 1024 * 1024;
  while (dense.length < DENSITY_MAX && memAvailableKb() > floorKb + 512 * 1024) {
    const batch = await Promise.all(Array.from({ length: 4 }, () => client.sandboxes.create(SPEC)));
    for (const b of batch) dense.push(b.id);
    all.push(...batch.map((b) => b.id));
    await Promise.all(batch.map((b) => client.sandboxes.waitForCreation(b.id, { timeoutMs: 600_000 })));
  }
  const lines = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" }).split("\n");
  const pids = lines.filter((l) => dense.some((id) => l.includes(`sandtree-${id}`))).map((l) => Number.parseInt(l, 10));
  const pss = pids.map(pssKb);
  out.density = {
    idle_sandboxes_256mib: dense.length,
    stopped_because: dense.length >= DENSITY_MAX ? `cap --density ${DENSITY_MAX}` : "2 GiB left",
    mem_available_mib_after: Math.round(memAvailableKb() / 1024),
    pss_mib_p50: +(pct(pss, 50) / 1024).toFixed(1),
    aim: ">= 100 on a 24 GiB machine",
  };
  out.accel = accel;
  out.floor = floor;
  console.log(JSON.stringify(out, null, 2));
} finally {
  if (rawTap) execFileSync("ip", ["link", "del", RAW_TAP]);
  for (let i = 0; i < all.length; i += 100) await client.sandboxes.bulkDelete({ ids: all.slice(i, i + 100) }).catch(() => {});
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
