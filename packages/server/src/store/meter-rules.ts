import type { MeterRecord } from "./rows.js";

/** The sandbox columns a meter record is made from. */
export interface MeteredSandbox {
  team_id: string;
  status: string;
  cpu_cores: number;
  memory_gb: number;
  disk_size_gb: number;
}

const BILLED_SANDBOX_STATES = new Set(["RUNNING", "PAUSED"]);

/**
 * What a sandbox in its current status is billed for, from `nowMs` on (every backend's rule):
 * RUNNING its vCPUs, memory and disk; PAUSED its disk only; any other status nothing (null).
 */
export function sandboxMeterRecord(id: string, sb: MeteredSandbox, nowMs: number): Omit<MeterRecord, "id"> | null {
  if (!BILLED_SANDBOX_STATES.has(sb.status)) return null;
  const running = sb.status === "RUNNING";
  return {
    kind: "sandbox",
    subject_id: id,
    sandbox_id: id,
    team_id: sb.team_id,
    state: sb.status,
    vcpus: running ? sb.cpu_cores : 0,
    memory_gib: running ? sb.memory_gb : 0,
    disk_gib: sb.disk_size_gb,
    stored_bytes: 0,
    start_ms: nowMs,
    end_ms: null,
  };
}
