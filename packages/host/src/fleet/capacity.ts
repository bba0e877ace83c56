import { statfsSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import type { Accel, HostCapacity } from "@sandtree/protocol";

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/**
 * This machine's capacity as a fleet host reports it: its CPUs, its memory, the free disk of
 * the directory its sandboxes live in, and the accelerator its VMs run under (the caller's
 * verdict of `detectAccel`).
 */
export function machineCapacity(dataDir: string, accel: Accel): HostCapacity {
  const fs = statfsSync(dataDir);
  return {
    vcpus: Math.max(1, availableParallelism()),
    memory_mib: Math.max(1, Math.floor(totalmem() / MIB)),
    disk_gib: Math.floor((Number(fs.bavail) * Number(fs.bsize)) / GIB),
    accel,
  };
}
