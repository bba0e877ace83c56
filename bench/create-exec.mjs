#!/usr/bin/env node
// Cold create and exec round trip through the API, each against a raw baseline measured in the
// same run on the same machine:
//   create: API call -> first command output   vs   raw QEMU boot (same kernel, initramfs and
//           image base, no server) -> first command output
//   exec:   `true` round trip through the API   vs   raw echo (PING/PONG) over the serial port,
//           and a raw `true` exec over the serial port (no HTTP)
// Usage: node bench/create-exec.mjs [--runs 5] [--execs 200]. Prints one JSON document.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createOverlay, detectAccel, guestArtifacts, ImageStore, QemuVm } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" }, execs: { type: "string", default: "200" } } });
const RUNS = Number(values.runs);
const EXECS = Number(values.execs);
const IMAGE = "sandtree/busybox";

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const stats = (xs) => ({
  n: xs.length,
  p50_ms: +pct(xs, 50).toFixed(3),
  p99_ms: +pct(xs, 99).toFixed(3),
  min_ms: +Math.min(...xs).toFixed(3),
});

async function rawBoot(work, image, accel, i) {
  const guest = guestArtifacts();
  const overlay = path.join(work, `raw-${i}.qcow2`);
  await createOverlay(image.basePath, overlay, 1024 ** 3);
  const t0 = performance.now();
  const vm = await QemuVm.start({
    name: `bench-raw-${i}`,
    accel,
    cpuCores: 1,
    memoryMb: 256,
    kernel: guest.kernel,
    initramfs: guest.initramfs,
    rootDisk: overlay,
    runDir: path.join(work, `r${i}`),
    logDir: path.join(work, `l${i}`),
  });
  const ex = vm.agent.exec({ argv: ["echo", "ready"] });
  for await (const ev of ex.events) if (ev.type === "stdout") break;
  const ms = performance.now() - t0;
  return { vm, ms };
}

// Cold creates: this bench measures the boot path (bench/warm.mjs measures warm clones).
process.env.SANDTREE_WARM_TEMPLATES = "0";
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-"));
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
try {
  const accel = await detectAccel("auto");
  const store = new ImageStore();
  const image = await store.resolve(IMAGE);
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });

  const raw = [];
  const api = [];
  let rawVm = null;
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
      const out = {
        bench: "create-exec",
        accel,
        image: IMAGE,
        runs: RUNS,
        cold_create: { api: stats(api), raw_qemu: stats(raw), ratio_p50: +(pct(api, 50) / pct(raw, 50)).toFixed(3), aim: 1.25 },
        exec_true: {
          api: stats(apiTrue),
          raw_serial_echo: stats(ping),
          raw_serial_exec_true: stats(rawTrue),
          ratio_p50_vs_echo: +(pct(apiTrue, 50) / pct(ping, 50)).toFixed(3),
          ratio_p50_vs_raw_exec: +(pct(apiTrue, 50) / pct(rawTrue, 50)).toFixed(3),
          aim: 2,
        },
      };
      console.log(JSON.stringify(out, null, 2));
    }
  }
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
