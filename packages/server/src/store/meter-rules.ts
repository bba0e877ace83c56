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

/** The checkpoint columns its meter records are made from. */
export interface MeteredCheckpoint {
  team_id: string;
  sandbox_id: string;
  state: string;
  stored_bytes: number;
}

const GiB = 1024 ** 3;

/**
 * Whether a checkpoint is billed (every backend's rule): a DURABLE one with stored bytes, for its
 * stored_bytes (its own layer and memory file: layers are never copied into children, so a layer
 * shared by a tree is counted once), from the moment it turned DURABLE until it is deleted.
 */
export function checkpointBilled(c: MeteredCheckpoint | undefined): c is MeteredCheckpoint {
  return c !== undefined && c.state === "DURABLE" && c.stored_bytes > 0;
}

/** The records a billed checkpoint opens at `nowMs`: its storage, and the upload charge once. */
export function checkpointMeterRecords(
  id: string,
  c: MeteredCheckpoint,
  nowMs: number,
  uploadCharged: boolean,
): Array<Omit<MeterRecord, "id">> {
  const base = {
    subject_id: id,
    sandbox_id: c.sandbox_id,
    team_id: c.team_id,
    state: c.state,
    vcpus: 0,
    memory_gib: 0,
    disk_gib: c.stored_bytes / GiB,
    stored_bytes: c.stored_bytes,
    start_ms: nowMs,
  };
  const records: Array<Omit<MeterRecord, "id">> = [{ ...base, kind: "checkpoint", end_ms: null }];
  if (!uploadCharged) records.push({ ...base, kind: "upload", end_ms: nowMs });
  return records;
}
