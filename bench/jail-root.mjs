#!/usr/bin/env node
// What a QEMU's own root costs (docs/security.md, the jail), beside the floor in the same run:
//   launcher:     spawn -> exit of `true` through the jail's launcher, with the root a sandbox's
//                 QEMU gets (tmpfs, binds, pivot_root) and with the launcher as it was before
//                 (private /proc alone), alternating; median and p90 in ms; where sandtree-jail
//                 is built, the same root through the shell chain it replaced too
//   warm_create:  API call -> first output of `echo` in a new sandbox (a warm clone, jailed),
//                 median of --creates; the floor's copy-on-write clone beside it
// Run it from a checkout without the root for the figure before. Needs root (the jail).
// Usage: node bench/jail-root.mjs [--launches 30] [--creates 10]. Prints one JSON document.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import * as qemu from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { measureFloor } from "./lib/floor.mjs";
import { stats } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: { launches: { type: "string", default: "30" }, creates: { type: "string", default: "10" } },
});
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-jailroot-"));
const out = { load_before: spawnSync("uptime", { encoding: "utf8" }).stdout.trim() };

// The launcher alone.
const uid = 1_100_000 + 4000;
const run = path.join(work, "run");
mkdirSync(run);
writeFileSync(path.join(work, "console.log"), "");
const root = { rw: [run, path.join(work, "console.log"), work], ro: [] };
const timed = (argv) => {
  const t = process.hrtime.bigint();
  const r = spawnSync(argv[0], argv[1]);
  if (r.status !== 0) throw new Error(`launcher failed: ${r.stderr}`);
  return Number(process.hrtime.bigint() - t) / 1e6;
};
// The launcher before the jail's root: a private /proc alone.
const before = () =>
  timed(qemu.shellJailCommand(uid, 'mount -t proc -o hidepid=invisible,subset=pid proc /proc && exec "$@"', ["true"]));
if (qemu.jailRootOf) {
  const withRoot = [];
  const shellRoot = [];
  const without = [];
  for (let i = 0; i < Number(values.launches); i++) {
    withRoot.push(timed(qemu.jailCommand(uid, ["true"], { tun: true, root })));
    // The same root through the unshare/sh/setpriv chain (what runs without sandtree-jail).
    if (qemu.jailerPath?.()) shellRoot.push(timed(qemu.jailCommand(uid, ["true"], { tun: true, root, via: "shell" })));
    without.push(before());
  }
  out.launcher = {
    launcher: qemu.jailerPath?.() ? "sandtree-jail" : "shell",
    with_root_ms: stats(withRoot),
    ...(shellRoot.length ? { with_root_shell_ms: stats(shellRoot) } : {}),
    before_ms: stats(without),
  };
} else out.launcher = { before_ms: stats(Array.from({ length: Number(values.launches) }, before)) };

// Warm creates through a real server (--creates 0: the launcher alone).
if (Number(values.creates) === 0) {
  rmSync(work, { recursive: true, force: true });
  console.log(JSON.stringify(out, null, 2));
  process.exit(0);
}
const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false });
try {
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
  const create = async () => {
    const sb = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await client.sandboxes.waitForCreation(sb.id, { intervalMs: 10, timeoutMs: 300_000 });
    return sb.id;
  };
  // The first create builds the templates; later ones are warm clones.
  await client.sandboxes.delete(await create());
  await new Promise((r) => setTimeout(r, 15_000));
  const times = [];
  for (let i = 0; i < Number(values.creates); i++) {
    const t0 = performance.now();
    const id = await create();
    await client.sandboxes.run(id, ["echo", "ready"]);
    times.push(performance.now() - t0);
    await client.sandboxes.delete(id);
  }
  out.warm_create = stats(times);
  out.floor = floor;
} finally {
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
out.load_after = spawnSync("uptime", { encoding: "utf8" }).stdout.trim();
console.log(JSON.stringify(out, null, 2));
