// The floor every benchmark prints beside its figures: bare QEMU with no sandtree code in the
// path (the team's shared raw-floor.py: a busybox shell on the serial port stands in for the
// agent), measured in the same run with the same accelerator. Figures a bench takes through the
// project's own QemuVm/agent path without the server are labelled `project_raw`, never floor.
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** raw-floor.py: $SANDTREE_FLOOR_SCRIPT, else `shared/bench/raw-floor.py` beside the project's root. */
export function floorScript() {
  return process.env.SANDTREE_FLOOR_SCRIPT ?? path.join(repo, "..", "shared", "bench", "raw-floor.py");
}

/**
 * raw-floor.py as the team keeps it, with its one fixed host-wide name (the template's RAM file
 * in /dev/shm) made this run's own, and a private RAW_WORK (its sockets, under `work`) holding
 * the shared kernel and initramfs: other benches' floor runs on this machine cannot collide with
 * it. Sets SANDTREE_FLOOR_SCRIPT and RAW_WORK for measureFloor; returns the script's path.
 */
export function privateFloor(work) {
  const rawBase = process.env.RAW_WORK ?? path.join(tmpdir(), "raw-baseline");
  const script = path.join(work, "raw-floor.py");
  const text = readFileSync(floorScript(), "utf8").replaceAll(
    "/dev/shm/raw-baseline.ram",
    `/dev/shm/raw-floor-${process.pid}.ram`,
  );
  writeFileSync(script, text);
  const raw = path.join(work, "raw");
  mkdirSync(raw);
  symlinkSync(path.join(rawBase, "x"), path.join(raw, "x"));
  copyFileSync(path.join(rawBase, "initrd.gz"), path.join(raw, "initrd.gz"));
  process.env.SANDTREE_FLOOR_SCRIPT = script;
  process.env.RAW_WORK = raw;
  return script;
}

/**
 * Runs the floor once (accel "kvm" or "tcg", as the server chose) and returns its figures with
 * where they came from; `{ error }` when the script is missing or fails, so a bench still prints.
 */
export async function measureFloor(accel) {
  const script = floorScript();
  const source = "raw-floor.py: bare QEMU, no sandtree code, same run and accelerator";
  if (!existsSync(script)) return { source, accel, error: `${script} not found (set SANDTREE_FLOOR_SCRIPT)` };
  const out = await runJsonScript([script], accel);
  return out.error ? { source, accel, error: out.error } : { source, accel, ...out.json };
}

/**
 * Runs a Python script of the floor (RAW_ACCEL set) and parses the JSON object on its last line;
 * `{ error }` when it cannot start, fails or prints something else.
 */
async function runJsonScript(args, accel) {
  const out = await new Promise((resolve) => {
    const child = spawn("python3", args, { env: { ...process.env, RAW_ACCEL: accel }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
    child.on("error", (err) => resolve({ error: err.message }));
    child.on("close", (code) => resolve(code === 0 ? { stdout } : { error: `exit ${code}: ${stderr.trim()}` }));
  });
  if (out.error) return { error: out.error };
  try {
    return { json: JSON.parse(out.stdout.trim().split("\n").at(-1)) };
  } catch {
    return { error: `unreadable output: ${out.stdout.slice(-200)}` };
  }
}

/** a / b rounded, or null when either is missing. */
export function ratio(a, b) {
  return typeof a === "number" && typeof b === "number" && b > 0 ? +(a / b).toFixed(3) : null;
}

/**
 * The burst floor: `n` bare copy-on-write clones of raw-floor.py's guest fired at once
 * (bench/floor-clone-cpu.py, same run and accelerator, the guest CPU model the project gives its
 * own VMs): how many a second all answer, and each clone's CPU. `{ error }` when it fails.
 */
export async function measureCloneBurstFloor(accel, n, cpuModel) {
  const script = path.join(repo, "bench", "floor-clone-cpu.py");
  const source = "floor-clone-cpu.py: bare QEMU clones of raw-floor.py's guest, no sandtree code, same run";
  const args = [script, "--clones", "3", "--burst", String(n), ...(cpuModel ? ["--cpu", cpuModel] : [])];
  const out = await runJsonScript(args, accel);
  return out.error ? { source, error: out.error } : { source, ...out.json };
}
