import { randomBytes } from "node:crypto";
import path from "node:path";
import { DISK_FILE_SUFFIX } from "@sandtree/host";

/** A new sandbox id: 16 base32 characters, short enough for socket paths, 80 bits of randomness. */
export function newSandboxId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let id = "sb-";
  for (const b of randomBytes(16)) id += alphabet[b & 31];
  return id;
}

/** The VM's RAM for a sandbox's memory_gb (a memory checkpoint records it: restores must match). */
export function memoryMbFor(memoryGb: number): number {
  return Math.max(128, Math.round(memoryGb * 1024));
}

/** File name of one of a sandbox's disk layers (the active one, or frozen ones that became checkpoints). */
export function liveDiskName(sandboxId: string, generation: string): string {
  return `live-${sandboxId}-${generation}${generation ? DISK_FILE_SUFFIX : ""}`;
}

/** The machine name a sandbox's VM runs under (a restarted server finds it by this name). */
export function machineNameOf(sandboxId: string): string {
  return `sandtree-${sandboxId}`;
}

/**
 * Where the control plane keeps a sandbox's files (its machine's own files, sockets and console
 * log, are its host's: MachineHost.consoleTail, discard; its disks lie in the host's layers
 * directory, asked by name: listLayers, removeLayer).
 */
export class SandboxPaths {
  constructor(readonly dataDir: string) {}

  sandboxDir(id: string): string {
    return path.join(this.dataDir, "sandboxes", id);
  }
  diskDir(id: string): string {
    return path.join(this.sandboxDir(id), "disk");
  }
  /** The server's own logs of a sandbox (its start command's output); kept after it ended. */
  logDir(id: string): string {
    return path.join(this.sandboxDir(id), "logs");
  }
  /** Spilled output of buffered execs (deleted with the sandbox). */
  outputDir(id: string): string {
    return path.join(this.sandboxDir(id), "outputs");
  }
}
