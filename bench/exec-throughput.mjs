#!/usr/bin/env node
// Exec latency and output/file throughput through the SDK against a real server, each beside the
// floor measured in the same run (raw-floor.py for exec `true`; the bare virtio-serial port of
// the same bare QEMU for throughput, see lib/serial-floor.mjs) and the project's own agent path
// without the server (project_raw: QemuVm + agent, no HTTP):
//   exec_true         `true` round trips, p50, on sandtree/busybox (static, like the floor's
//                     /bin/true) and on sandtree/debian (a dynamically linked /usr/bin/true)
//   out_yes           `yes ... | head -c 64M`       (a program that writes in small pieces)
//   out_head_zero     `head -c 64M /dev/zero`       (idem)
//   out_dd_4k         `dd if=/dev/zero bs=4096`     (64 MiB)
//   out_cat           `cat` of a 256 MiB file (in the page cache)
//   upload, download  256 MiB through files.upload / files.download
// program_alone_in_guest: the same command with its output to /dev/null, timed in the guest
// (the most any transport could carry from it).
// Each throughput figure is the median of --runs repeats (other VMs share the machine).
// --baseline-guest DIR boots a second raw VM from DIR's initramfs.cpio.gz (an older build of
// packages/guest, e.g. a copy of $SANDTREE_CACHE_DIR/guest taken before a change) and measures it
// interleaved with the current guest's raw VM, so a guest change is compared under the same load.
// Usage: node bench/exec-throughput.mjs [--runs 3] [--execs 100] [--no-raw] [--baseline-guest DIR].
// Prints one JSON document.
import { randomBytes } from "node:crypto";
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { detectAccel, ImageStore } from "@sandtree/host";
import { QemuVm } from "@sandtree/host/qemu";
import { NdjsonDecoder, SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { rawVmOptions } from "./lib/raw-vm.mjs";
import { measureSerialFloor } from "./lib/serial-floor.mjs";

const values = benchArgs({ runs: 3, execs: 100, "no-raw": false, "baseline-guest": undefined });
const { runs: RUNS, execs: EXECS } = values;
const IMAGE = "sandtree/debian";
const MiB = 1024 * 1024;
const SMALL = 64 * MiB;
const BIG = 256 * MiB;
const CASES = {
  out_yes: [`yes abcdefghijklmnopqrstuvwxyz | head -c ${SMALL}`, SMALL],
  out_head_zero: [`head -c ${SMALL} /dev/zero`, SMALL],
  out_dd_4k: [`dd if=/dev/zero bs=4096 count=${SMALL / 4096} status=none`, SMALL],
  out_cat: ["cat /root/big", BIG],
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? +s[Math.floor((s.length - 1) / 2)].toFixed(3) : null;
};
const mbs = (bytes, ms) => +(bytes / MiB / (ms / 1000)).toFixed(1);

async function apiOutput(client, id, cmd, expect) {
  const t0 = performance.now();
  const h = await client.sandboxes.exec(id, ["sh", "-c", cmd]);
  let bytes = 0;
  for await (const chunk of h.stdout) bytes += chunk.length;
  const exit = await h.wait();
  if (exit.exit_code !== 0 || bytes !== expect) throw new Error(`${cmd}: exit ${exit.exit_code}, ${bytes} bytes`);
  return mbs(bytes, performance.now() - t0);
}

/**
 * The same through the NDJSON form of the stream (base64 in JSON lines: what the SDK read before
 * the binary stream), decoded as the SDK did, so both forms are compared in one sitting.
 */
async function apiNdjsonOutput(serverUrl, key, id, cmd, expect) {
  const t0 = performance.now();
  const res = await fetch(`${serverUrl}/v1/sandboxes/${id}/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/x-ndjson" },
    body: JSON.stringify({ command: ["sh", "-c", cmd] }),
  });
  const dec = new NdjsonDecoder();
  let bytes = 0;
  let exit = null;
  const take = (lines) => {
    for (const line of lines) {
      const ev = JSON.parse(line);
      if (ev.type === "stdout") bytes += Buffer.from(ev.data, "base64").length;
      else if (ev.type === "exit") exit = ev;
    }
  };
  for await (const chunk of res.body) take(dec.push(chunk));
  take(dec.end());
  if (exit?.exit_code !== 0 || bytes !== expect) throw new Error(`ndjson ${cmd}: exit ${exit?.exit_code}, ${bytes} bytes`);
  return mbs(bytes, performance.now() - t0);
}

/** The program alone: MB/s of `cmd > /dev/null` timed inside the guest (the ceiling for its output). */
async function inGuest(client, id, cmd, expect) {
  const script = `s=$(date +%s%N); ${cmd} > /dev/null; e=$(date +%s%N); echo $((e - s))`;
  const r = await client.sandboxes.run(id, ["sh", "-c", script]);
  const ns = Number(r.stdout.trim());
  if (r.exit_code !== 0 || !(ns > 0)) throw new Error(`in guest ${cmd}: ${r.stdout} ${r.stderr}`);
  return mbs(expect, ns / 1e6);
}

async function rawOutput(vm, cmd, expect) {
  const t0 = performance.now();
  const ex = vm.agent.exec({ argv: ["sh", "-c", cmd] });
  let bytes = 0;
  for await (const ev of ex.events) if (ev.type === "stdout") bytes += ev.data.length;
  const info = await ex.exited;
  if (info.exit_code !== 0 || bytes !== expect) throw new Error(`raw ${cmd}: exit ${info.exit_code}, ${bytes} bytes`);
  return mbs(bytes, performance.now() - t0);
}

/** Upload then download of 256 MiB through the agent alone (no HTTP): MB/s of each. */
async function rawFiles(vm, local) {
  let t = performance.now();
  const w = await vm.agent.writeFile("/root/up.bin", createReadStream(local, { highWaterMark: 1024 * 1024 }));
  if (w.bytes !== BIG) throw new Error(`raw upload wrote ${w.bytes}`);
  const up = mbs(BIG, performance.now() - t);
  t = performance.now();
  let bytes = 0;
  for await (const chunk of vm.agent.readFile("/root/big")) bytes += chunk.length;
  if (bytes !== BIG) throw new Error(`raw download read ${bytes}`);
  return { up, down: mbs(BIG, performance.now() - t) };
}

async function rawVm(work, accel, tag, initramfs) {
  const image = await new ImageStore().resolve(IMAGE);
  const vm = await QemuVm.start(
    await rawVmOptions(work, { accel, image, tag: `exec-${tag}`, memoryMb: 1024, diskBytes: 2 * 1024 ** 3, initramfs }),
  );
  const info = await vm.agent.exec({ argv: ["sh", "-c", `head -c ${BIG} /dev/zero > /root/big && sync`] }).exited;
  if (info.exit_code !== 0) throw new Error(`${tag}: making /root/big failed`);
  return vm;
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const serialFloor = await measureSerialFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-exec-"));
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
let vm = null;
let base = null;
try {
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
  const sb = await client.sandboxes.create({ image: IMAGE, memory_gb: 1, disk_size_gb: 2 });
  await client.sandboxes.waitForCreation(sb.id, { intervalMs: 20, timeoutMs: 300_000 });
  const mk = await client.sandboxes.run(sb.id, ["sh", "-c", `head -c ${BIG} /dev/zero > /root/big && sync`]);
  if (mk.exit_code !== 0) throw new Error(`making /root/big: ${mk.stderr}`);
  if (!values["no-raw"]) vm = await rawVm(work, accel, "raw");
  if (values["baseline-guest"]) {
    base = await rawVm(work, accel, "baseline", path.join(values["baseline-guest"], "initramfs.cpio.gz"));
  }

  const bb = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  await client.sandboxes.waitForCreation(bb.id, { intervalMs: 20, timeoutMs: 300_000 });
  const apiTrue = [];
  const bbTrue = [];
  const rawTrue = [];
  const baseTrue = [];
  for (let i = 0; i < 5; i++) await client.sandboxes.run(sb.id, ["true"]); // warm up
  for (let i = 0; i < 5; i++) await client.sandboxes.run(bb.id, ["true"]);
  for (let i = 0; i < EXECS; i++) {
    let t = performance.now();
    await client.sandboxes.run(bb.id, ["true"]);
    bbTrue.push(performance.now() - t);
    t = performance.now();
    await client.sandboxes.run(sb.id, ["true"]);
    apiTrue.push(performance.now() - t);
    if (vm) {
      t = performance.now();
      await vm.agent.exec({ argv: ["true"] }).exited;
      rawTrue.push(performance.now() - t);
    }
    if (base) {
      t = performance.now();
      await base.agent.exec({ argv: ["true"] }).exited;
      baseTrue.push(performance.now() - t);
    }
  }
  await client.sandboxes.delete(bb.id);

  const api = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  const raw = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  const baseline = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  const alone = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  const ndjson = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  const up = [];
  const down = [];
  const rawFile = { up: [], down: [] };
  const writeAlone = [];
  const baseFile = { up: [], down: [] };
  const local = path.join(work, "upload.bin");
  writeFileSync(local, randomBytes(BIG));
  for (let r = 0; r < RUNS; r++) {
    for (const [name, [cmd, expect]] of Object.entries(CASES)) {
      api[name].push(await apiOutput(client, sb.id, cmd, expect));
      ndjson[name].push(await apiNdjsonOutput(server.url, server.firstKey ?? "", sb.id, cmd, expect));
      alone[name].push(await inGuest(client, sb.id, cmd, expect));
      if (vm) raw[name].push(await rawOutput(vm, cmd, expect));
      if (base) baseline[name].push(await rawOutput(base, cmd, expect));
    }
    let t = performance.now();
    const u = await client.files.upload(sb.id, local, "/root/up.bin");
    if (u.bytes !== BIG) throw new Error(`upload wrote ${u.bytes}`);
    up.push(mbs(BIG, performance.now() - t));
    t = performance.now();
    const d = await client.files.download(sb.id, "/root/big", path.join(work, `down-${r}.bin`));
    if (d.bytes !== BIG) throw new Error(`download read ${d.bytes}`);
    down.push(mbs(BIG, performance.now() - t));
    rmSync(path.join(work, `down-${r}.bin`), { force: true });
    writeAlone.push(await inGuest(client, sb.id, `(head -c ${BIG} /dev/zero > /root/w.bin)`, BIG));
    await client.sandboxes.run(sb.id, ["rm", "-f", "/root/w.bin"]);
    for (const [v, acc] of [
      [vm, rawFile],
      [base, baseFile],
    ]) {
      if (!v) continue;
      const f = await rawFiles(v, local);
      acc.up.push(f.up);
      acc.down.push(f.down);
    }
  }
  await client.sandboxes.delete(sb.id);

  const floorTrue = floor.raw_exec_true_rtt_ms_p50;
  const out = {
    bench: "exec-throughput",
    accel,
    image: IMAGE,
    runs: RUNS,
    exec_true: {
      busybox_api_p50_ms: median(bbTrue),
      debian_api_p50_ms: median(apiTrue),
      debian_project_raw_agent_p50_ms: vm ? median(rawTrue) : null,
      debian_baseline_guest_raw_agent_p50_ms: base ? median(baseTrue) : null,
      floor_exec_true_ms: floorTrue ?? null,
      ratio_busybox_vs_floor: ratio(median(bbTrue), floorTrue),
      aim_ratio: 2,
    },
    output_mb_s: Object.fromEntries(
      Object.keys(CASES).map((k) => [
        k,
        {
          api_median: median(api[k]),
          api_runs: api[k],
          // The NDJSON + base64 form of the same stream (the SDK's before the binary stream).
          api_ndjson_median: median(ndjson[k]),
          project_raw_median: vm ? median(raw[k]) : null,
          baseline_guest_raw_median: base ? median(baseline[k]) : null,
          program_alone_in_guest_median: median(alone[k]),
          // The port written straight by a shell: large writes (dd bs=64K), or the same small-write program.
          floor_port_mb_s: k === "out_cat" || k === "out_dd_4k" ? serialFloor.out_large_mb_s : serialFloor.out_small_mb_s,
          aim: k === "out_cat" ? 150 : 50,
        },
      ]),
    ),
    files_mb_s: {
      upload: {
        api_median: median(up),
        api_runs: up,
        project_raw_median: median(rawFile.up),
        // `head -c 256M /dev/zero > FILE` in the guest: what its disk takes without any transfer.
        guest_file_write_alone_median: median(writeAlone),
        baseline_guest_raw_median: median(baseFile.up),
        floor_port_mb_s: serialFloor.in_mb_s ?? null,
        aim: 100,
      },
      download: {
        api_median: median(down),
        api_runs: down,
        project_raw_median: median(rawFile.down),
        // `cat FILE > /dev/null` in the guest is out_cat's program_alone_in_guest_median.
        baseline_guest_raw_median: median(baseFile.down),
        floor_port_mb_s: serialFloor.out_large_mb_s ?? null,
        aim: 100,
      },
    },
    floor,
    serial_floor: serialFloor,
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await vm?.stop();
  await base?.stop();
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
