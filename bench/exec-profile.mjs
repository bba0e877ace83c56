#!/usr/bin/env node
// Where exec and file transfers spend their time, layer by layer, beside the floor of the same
// run (raw-floor.py's /bin/true round trip; the bare virtio-serial port, lib/serial-floor.mjs):
//   in_guest      the program alone inside the guest (no transport): `head -c 64M /dev/zero`
//                 to /dev/null, the same through a pipe reader (`| cat > /dev/null`), and a
//                 64 MiB file write to the disk (`dd bs=1M`)
//   project_raw   the same through QemuVm + the agent, no HTTP: exec `true` (argv `true` and
//                 `/bin/true`), output of `head -c 64M /dev/zero`, upload of 64 MiB
//   api           the same through the SDK and the server
// With --baseline-guest DIR a second raw VM boots from DIR's initramfs.cpio.gz (an older build
// of packages/guest) and is measured interleaved with the current one, so a guest change is
// compared under the same load. Each figure is the median of --runs repeats.
// Usage: node bench/exec-profile.mjs [--image sandtree/debian] [--memory-gb 1] [--runs 5] [--execs 60] [--no-api] [--no-floor] [--baseline-guest DIR]
// Prints one JSON document.
import { randomBytes } from "node:crypto";
import { createReadStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { detectAccel, guestArtifacts, ImageStore } from "@sandtree/host";
import { createOverlay, QemuVm } from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { measureSerialFloor } from "./lib/serial-floor.mjs";

const values = benchArgs({
  runs: 5,
  execs: 60,
  "no-api": false,
  "no-floor": false,
  "baseline-guest": undefined,
  image: "sandtree/debian",
  "memory-gb": 1,
});
const { runs: RUNS, execs: EXECS, image: IMAGE, "memory-gb": MEMORY_GB } = values;
const MiB = 1024 * 1024;
const N = 64 * MiB;
const HEAD = `head -c ${N} /dev/zero`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? +s[Math.floor((s.length - 1) / 2)].toFixed(3) : null;
};
const mbs = (bytes, ms) => +(bytes / MiB / (ms / 1000)).toFixed(1);

/**
 * MB/s of `cmd` timed inside the guest by its own clock (no transport in the figure). The clock
 * is /proc/uptime (10 ms steps, fine for runs of seconds): busybox's date has no %N.
 */
async function inGuest(vm, cmd) {
  const script = `read s x < /proc/uptime; ${cmd}; read e x < /proc/uptime; echo $s $e`;
  const ex = vm.agent.exec({ argv: ["sh", "-c", script] });
  let text = "";
  for await (const ev of ex.events) if (ev.type === "stdout") text += ev.data.toString();
  const [s, e] = text.trim().split(" ").map(Number);
  if ((await ex.exited).exit_code !== 0 || !(e > s)) throw new Error(`in guest ${cmd}: ${text}`);
  return mbs(N, (e - s) * 1000);
}

/**
 * CPU time QEMU (the guest's vCPU and its devices) has used, in ms: unlike wall time it does not
 * grow while other processes hold the host's cores, so guest builds compare on a loaded machine.
 * Kernel ticks (10 ms): summed over many calls.
 */
function qemuCpuMs(vm) {
  const f = readFileSync(`/proc/${vm.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** Runs fn, adding QEMU's CPU time during it to acc.cpu[key]; returns fn's value. */
async function charged(vm, acc, key, fn) {
  const c = qemuCpuMs(vm);
  const v = await fn();
  acc.cpu[key] = (acc.cpu[key] ?? 0) + qemuCpuMs(vm) - c;
  return v;
}

async function rawTrue(vm, argv0) {
  const t = performance.now();
  const info = await vm.agent.exec({ argv: [argv0] }).exited;
  if (info.exit_code !== 0) throw new Error(`${argv0}: exit ${info.exit_code}`);
  return performance.now() - t;
}

async function rawOutput(vm) {
  const t0 = performance.now();
  const ex = vm.agent.exec({ argv: ["sh", "-c", HEAD] });
  let bytes = 0;
  for await (const ev of ex.events) if (ev.type === "stdout") bytes += ev.data.length;
  if ((await ex.exited).exit_code !== 0 || bytes !== N) throw new Error(`raw output: ${bytes} bytes`);
  return mbs(N, performance.now() - t0);
}

async function rawUpload(vm, local) {
  const t = performance.now();
  const w = await vm.agent.writeFile("/root/up.bin", createReadStream(local, { highWaterMark: MiB }));
  if (w.bytes !== N) throw new Error(`raw upload wrote ${w.bytes}`);
  return mbs(N, performance.now() - t);
}

async function rawVm(work, accel, tag, initramfs) {
  const guest = guestArtifacts();
  const image = await new ImageStore().resolve(IMAGE);
  const overlay = path.join(work, `${tag}.qcow2`);
  await createOverlay(image.basePath, overlay, 2 * 1024 ** 3);
  return QemuVm.start({
    name: `bench-exec-profile-${tag}`,
    accel,
    cpuCores: 1,
    memoryMb: Math.round(MEMORY_GB * 1024),
    kernel: guest.kernel,
    initramfs: initramfs ?? guest.initramfs,
    rootDisk: overlay,
    runDir: path.join(work, `${tag}-run`),
    logDir: path.join(work, `${tag}-log`),
  });
}

function layer() {
  return { true_ms: [], abs_true_ms: [], out_mb_s: [], upload_mb_s: [], alone: [], pipe: [], write: [], cpu: {} };
}

const per = (total, n) => (n ? +(total / n).toFixed(2) : null);

function summary(l) {
  const mib = (l.out_mb_s.length * N) / MiB;
  return {
    // QEMU's CPU ms per exec `true` and per MiB moved (see qemuCpuMs): the load-independent view.
    qemu_cpu_ms_per_exec_true: per(l.cpu.exec ?? 0, l.true_ms.length + l.abs_true_ms.length),
    qemu_cpu_ms_per_mib_out: per(l.cpu.out ?? 0, mib),
    qemu_cpu_ms_per_mib_upload: per(l.cpu.upload ?? 0, mib),
    exec_true_p50_ms: median(l.true_ms),
    exec_abs_true_p50_ms: median(l.abs_true_ms),
    out_head_zero_mb_s: median(l.out_mb_s),
    upload_mb_s: median(l.upload_mb_s),
    in_guest_head_to_null_mb_s: median(l.alone),
    in_guest_head_pipe_cat_mb_s: median(l.pipe),
    in_guest_file_write_mb_s: median(l.write),
  };
}

const accel = await detectAccel("auto");
const floor = values["no-floor"] ? { skipped: true } : await measureFloor(accel);
const serialFloor = values["no-floor"] ? { skipped: true } : await measureSerialFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-exec-profile-"));
const local = path.join(work, "upload.bin");
writeFileSync(local, randomBytes(N));
const vms = [];
let server = null;
try {
  vms.push({ tag: "current", vm: await rawVm(work, accel, "current"), l: layer() });
  if (values["baseline-guest"]) {
    const initramfs = path.join(values["baseline-guest"], "initramfs.cpio.gz");
    vms.push({ tag: "baseline", vm: await rawVm(work, accel, "baseline", initramfs), l: layer() });
  }
  let client = null;
  let sb = null;
  const api = { true_ms: [], out_mb_s: [], upload_mb_s: [] };
  if (!values["no-api"]) {
    server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
    client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
    sb = await client.sandboxes.create({ image: IMAGE, memory_gb: MEMORY_GB, disk_size_gb: 2 });
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
    for (let i = 0; i < 5; i++) await client.sandboxes.run(sb.id, ["true"]);
  }
  for (const { vm } of vms) for (let i = 0; i < 5; i++) await rawTrue(vm, "true");
  for (let i = 0; i < EXECS; i++) {
    // Alternating orders: neither VM nor argv form always runs first after a pause.
    for (const { vm, l } of i % 2 ? [...vms].reverse() : vms) {
      if (i % 2) l.abs_true_ms.push(await charged(vm, l, "exec", () => rawTrue(vm, "/bin/true")));
      l.true_ms.push(await charged(vm, l, "exec", () => rawTrue(vm, "true")));
      if (!(i % 2)) l.abs_true_ms.push(await charged(vm, l, "exec", () => rawTrue(vm, "/bin/true")));
    }
    if (client && sb) {
      const t = performance.now();
      await client.sandboxes.run(sb.id, ["true"]);
      api.true_ms.push(performance.now() - t);
    }
  }
  for (let r = 0; r < RUNS; r++) {
    for (const { vm, l } of vms) {
      l.alone.push(await inGuest(vm, `${HEAD} > /dev/null`));
      l.pipe.push(await inGuest(vm, `${HEAD} | cat > /dev/null`));
      l.write.push(await inGuest(vm, `dd if=/dev/zero of=/root/w.bin bs=1M count=${N / MiB} 2>/dev/null`));
      await vm.agent.exec({ argv: ["rm", "-f", "/root/w.bin"] }).exited;
      l.out_mb_s.push(await charged(vm, l, "out", () => rawOutput(vm)));
      l.upload_mb_s.push(await charged(vm, l, "upload", () => rawUpload(vm, local)));
    }
    if (client && sb) {
      let t = performance.now();
      const h = await client.sandboxes.exec(sb.id, ["sh", "-c", HEAD]);
      let bytes = 0;
      for await (const chunk of h.stdout) bytes += chunk.length;
      await h.wait();
      if (bytes !== N) throw new Error(`api output: ${bytes} bytes`);
      api.out_mb_s.push(mbs(N, performance.now() - t));
      t = performance.now();
      const u = await client.files.upload(sb.id, local, "/root/up.bin");
      if (u.bytes !== N) throw new Error(`api upload wrote ${u.bytes}`);
      api.upload_mb_s.push(mbs(N, performance.now() - t));
    }
  }
  const cur = summary(vms[0].l);
  console.log(
    JSON.stringify(
      {
        bench: "exec-profile",
        accel,
        runs: RUNS,
        execs: EXECS,
        project_raw: Object.fromEntries(vms.map(({ tag, l }) => [tag, summary(l)])),
        api: values["no-api"]
          ? null
          : {
              exec_true_p50_ms: median(api.true_ms),
              out_head_zero_mb_s: median(api.out_mb_s),
              upload_mb_s: median(api.upload_mb_s),
              out_runs: api.out_mb_s,
              upload_runs: api.upload_mb_s,
            },
        floor_exec_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
        ratio_raw_true_vs_floor: ratio(cur.exec_true_p50_ms, floor.raw_exec_true_rtt_ms_p50),
        floor_port_out_small_mb_s: serialFloor.out_small_mb_s ?? null,
        floor_port_out_large_mb_s: serialFloor.out_large_mb_s ?? null,
        floor_port_in_mb_s: serialFloor.in_mb_s ?? null,
        floor,
        serial_floor: serialFloor,
      },
      null,
      2,
    ),
  );
} finally {
  for (const { vm } of vms) await vm.stop().catch(() => {});
  await server?.close();
  rmSync(work, { recursive: true, force: true });
}
