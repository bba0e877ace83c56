#!/usr/bin/env node
// What re-owning a sandbox's tap costs each start with a network (a jailed QEMU may attach only to
// a tap its uid owns: ownTap, a few lines of Python since Node has no ioctl). Same run, alternating:
//   via_path_python3:   `python3` as found on PATH (a version manager's shim where there is one)
//   via_interpreter:    the interpreter it leads to, asked once (what ownTap does)
// beside the floor (bare QEMU, ../shared/bench/raw-floor.py). Needs root (creates one tap).
// Usage: node bench/tap-owner.mjs [--runs 20]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { ownTap } from "@sandtree/host/qemu";
import { measureFloor } from "./lib/floor.mjs";
import { stats } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "20" } } });
const RUNS = Number(values.runs);
const tap = `stbench${process.pid % 10000}`;
const out = { bench: "tap-owner", load_before: execFileSync("uptime", { encoding: "utf8" }).trim() };
out.floor = await measureFloor(await detectAccel("auto"));
execFileSync("ip", ["tuntap", "add", "dev", tap, "mode", "tap"]);
try {
  await ownTap(tap, 65534); // resolves the interpreter once, untimed
  const samples = { via_path_python3: [], via_interpreter: [] };
  for (let i = 0; i < RUNS; i++) {
    for (const [name, via] of [
      ["via_path_python3", "python3"],
      ["via_interpreter", undefined],
    ]) {
      const t0 = performance.now();
      await ownTap(tap, 65534 - i, via ? { via } : {});
      samples[name].push(performance.now() - t0);
    }
  }
  out.via_path_python3 = stats(samples.via_path_python3);
  out.via_interpreter = stats(samples.via_interpreter);
  out.saved_p50_ms = +(out.via_path_python3.p50_ms - out.via_interpreter.p50_ms).toFixed(1);
} finally {
  execFileSync("ip", ["link", "del", tap]);
}
out.load_after = execFileSync("uptime", { encoding: "utf8" }).trim();
console.log(JSON.stringify(out, null, 2));
