import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** Whether `pid` is still the QEMU named `name` (not gone, not a zombie, not a reused pid). */
export function qemuAlive(pid: number, name: string): boolean {
  try {
    process.kill(pid, 0);
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return (argv[0] ?? "").includes("qemu-system") && argv.includes(name);
  } catch {
    return false;
  }
}

/** The command line of every QEMU process on this machine, read from /proc. */
function qemuCommandLines(): Array<{ pid: number; argv: string[] }> {
  const found: Array<{ pid: number; argv: string[] }> = [];
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if ((argv[0] ?? "").includes("qemu-system")) found.push({ pid: Number(e), argv });
  }
  return found;
}

/**
 * QEMU processes whose command line names a path under `runRoot` (one server's socket
 * directory), with their `-name`: what a server finds of its VMs after a restart.
 */
export function findQemuProcesses(runRoot: string): Array<{ pid: number; name: string }> {
  const prefix = `${path.resolve(runRoot)}/`;
  const found: Array<{ pid: number; name: string }> = [];
  for (const { pid, argv } of qemuCommandLines()) {
    if (!argv.some((a) => a.includes(prefix))) continue;
    const name = argv[argv.indexOf("-name") + 1];
    if (argv.includes("-name") && name) found.push({ pid, name });
  }
  return found;
}

/** PIDs of the QEMU processes running under `-name name` (a VM's name), whoever started them. */
export function qemuPidsNamed(name: string): number[] {
  return qemuCommandLines()
    .filter(({ argv }) => argv[argv.indexOf("-name") + 1] === name)
    .map(({ pid }) => pid);
}
