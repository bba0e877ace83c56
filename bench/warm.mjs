#!/usr/bin/env node
// Warm starts and memory snapshots, each against a raw baseline measured in the same run:
//   warm create (API call -> first command output)     vs  raw clone: QemuVm.start restoring the
//                                                          same template directly (no server)
//   memory fork of 1, 2, 4, 8 children (call -> every child answered)
//   episode reset (call -> first command output)        vs  raw restore of the same memory state
//   density: idle 256 MiB sandboxes started until the host has 2 GiB left (or --density N),
//            with PSS per sandbox
// Usage: node bench/warm.mjs [--runs 10] [--density 40]. Prints one JSON document.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createOverlay, guestArtifacts, QemuVm } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

const { values } = parseArgs({
  options: { runs: { type: "string", default: "10" }, density: { type: "string", default: "40" } },
});
const RUNS = Number(values.runs);
const DENSITY_MAX = Number(values.density);
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => ({ n: xs.length, p50_ms: +pct(xs, 50).toFixed(1), p99_ms: +pct(xs, 99).toFixed(1) });
const memAvailableKb = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);
const pssKb = (pid) => Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);

const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-warm-"));
const dataDir = path.join(work, "data");
const server = await startServer({ dataDir, port: 0, logger: false });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const guest = guestArtifacts();
const first = async (id) => (await client.sandboxes.run(id, ["echo", "ready"])).stdout;

async function rawRestore(tag, opts) {
  const layers = path.join(dataDir, "layers");
  const disk = path.join(layers, `bench-${tag}.qcow2`);
  await createOverlay(opts.backing, disk, 1024 ** 3);
  const t0 = performance.now();
  const vm = await QemuVm.start({
    name: `bench-${tag}`,
    accel: "tcg",
    cpuCores: 1,
    memoryMb: 256,
    kernel: guest.kernel,
    initramfs: guest.initramfs,
    rootDisk: disk,
    runDir: path.join(work, `r-${tag}`),
    logDir: path.join(work, `l-${tag}`),
    restoreFrom: opts.state,
    ...(opts.ram ? { memoryFile: { path: opts.ram, share: false } } : {}),
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

  const warm = [];
  const raw = [];
  for (let i = 0; i < RUNS; i++) {
    raw.push(await rawRestore(`clone${i}`, { backing: tmpl.diskName, state: tmpl.stateFile, ram: tmpl.ramFile }));
    const t0 = performance.now();
    const sb = await client.sandboxes.create(SPEC);
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10 });
    await first(sb.id);
    warm.push(performance.now() - t0);
    await client.sandboxes.delete(sb.id);
  }
  out.warm_create = { api: stats(warm), raw_clone: stats(raw), ratio_p50: +(pct(warm, 50) / pct(raw, 50)).toFixed(3), aim: 1.3 };

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
    out.memory_fork.push({ children: n, all_answered_ms: +(performance.now() - t0).toFixed(1) });
    await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
  }

  // Episode reset vs a raw restore of the same memory state.
  const ck = await client.checkpoints.waitForCheckpoint((await client.checkpoints.create(parent.id, { includeMemory: true })).id);
  const db = (await import("better-sqlite3")).default(path.join(dataDir, "sandtree.db"), { readonly: true });
  const row = db.prepare("SELECT blob_key, mem_key FROM checkpoints WHERE id = ?").get(ck.id);
  db.close();
  const resets = [];
  const rawResets = [];
  for (let i = 0; i < RUNS; i++) {
    rawResets.push(await rawRestore(`restore${i}`, { backing: row.blob_key, state: path.join(dataDir, "layers", row.mem_key) }));
    const t0 = performance.now();
    await client.sandboxes.reset(parent.id, ck.id);
    await first(parent.id);
    resets.push(performance.now() - t0);
  }
  out.reset = {
    api: stats(resets),
    raw_restore: stats(rawResets),
    ratio_p50: +(pct(resets, 50) / pct(rawResets, 50)).toFixed(3),
    aim: 1.5,
  };

  // Density: idle warm 256 MiB sandboxes until 2 GiB are left or the cap is reached.
  const dense = [];
  const floorKb = 2 * 1024 * 1024;
  while (dense.length < DENSITY_MAX && memAvailableKb() > floorKb + 512 * 1024) {
    const batch = await Promise.all(Array.from({ length: 4 }, () => client.sandboxes.create(SPEC)));
    for (const b of batch) dense.push(b.id);
    all.push(...batch.map((b) => b.id));
    await Promise.all(batch.map((b) => client.sandboxes.waitForCreation(b.id, { timeoutMs: 600_000 })));
  }
  const { execFileSync } = await import("node:child_process");
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
  console.log(JSON.stringify(out, null, 2));
} finally {
  for (let i = 0; i < all.length; i += 100) await client.sandboxes.bulkDelete({ ids: all.slice(i, i + 100) }).catch(() => {});
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
