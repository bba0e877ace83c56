#!/usr/bin/env node
// What the network hop of the remote host costs a command: one VM (sandtree/busybox) started by a
// QEMU host served on loopback (serveMachineHost), `true` run N times alternately through the
// worker's own Machine (in-process, no hop) and through the RemoteMachine (Connect-RPC over
// HTTP/2), beside the floor (../shared/bench/raw-floor.py, same run and accelerator).
// Usage: node bench/remote-host.mjs [--execs 200]. Prints one JSON document.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { connectRemoteHost, createQemuHost, detectAccel, guestArtifacts, serveMachineHost } from "@sandtree/host";
import { measureFloor } from "./lib/floor.mjs";
import { stats } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { execs: { type: "string", default: "200" } } });
const EXECS = Number(values.execs);

async function runTrue(m) {
  const t0 = performance.now();
  for await (const ev of m.exec({ argv: ["true"], timeoutMs: 30_000 }).events)
    if (ev.type === "exit" && ev.info.exit_code !== 0) throw new Error("true failed");
  return performance.now() - t0;
}

const accel = await detectAccel("auto");
const dir = mkdtempSync("/tmp/strbench-");
const key = "stw_bench";
const worker = await serveMachineHost({
  host: createQemuHost({
    accel,
    runRoot: path.join(dir, "r"),
    logRoot: path.join(dir, "logs"),
    layersDir: dir,
    volumesDir: path.join(dir, "volumes"),
  }),
  key: () => key,
});
const host = await connectRemoteHost({ url: worker.url, key });
let remote;
try {
  const { kernel, initramfs } = guestArtifacts();
  const base = await host.linkBase((await host.images.resolve("sandtree/busybox", {})).basePath);
  await host.createDisk(base, "b.qcow2", 1024 ** 3);
  remote = await host.start({
    name: "bench-remote",
    accel,
    cpuCores: 1,
    memoryMb: 256,
    kernel,
    initramfs,
    rootDisk: "b.qcow2",
  });
  const local = worker.served.get("bench-remote");
  for (let i = 0; i < 10; i++) await runTrue(i % 2 ? local : remote); // warm both paths
  const inProcess = [];
  const overNetwork = [];
  for (let i = 0; i < EXECS; i++) {
    inProcess.push(await runTrue(local));
    overNetwork.push(await runTrue(remote));
  }
  const floor = await measureFloor(accel);
  console.log(
    JSON.stringify(
      {
        bench: "remote-host",
        accel,
        loadavg_1m: +loadavg()[0].toFixed(2),
        exec_true_in_process: stats(inProcess),
        exec_true_remote: stats(overNetwork),
        floor_exec_true_ms: floor.raw_exec_true_rtt_ms_p50 ?? null,
        floor_serial_echo_ms: floor.raw_serial_echo_rtt_ms_p50 ?? null,
        floor,
      },
      null,
      2,
    ),
  );
} finally {
  await remote?.stop({ graceMs: 0 }).catch(() => {});
  host.close();
  await worker.close();
  rmSync(dir, { recursive: true, force: true });
}
