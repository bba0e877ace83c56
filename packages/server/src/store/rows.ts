import type { Checkpoint, JobStatus, NetworkMode, Sandbox, SandboxStatus, TeamUsage } from "@sandtree/protocol";

// What the Store interface reads and writes: every row, patch and filter type of the store, in
// one module that depends on no backend (SQLite now, PostgreSQL later implement them alike).

export interface TeamRow {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeyRow {
  id: string;
  team_id: string;
  prefix: string;
  is_admin: boolean;
  created_at: string;
  revoked_at: string | null;
}

export interface SandboxFilter {
  status?: SandboxStatus;
  labels?: Record<string, string>;
  /** Only sandboxes placed on this fleet host (its id). */
  hostId?: string;
  limit: number;
  /** Exclusive upper bound on the sequence number (pagination cursor). */
  beforeSeq?: number;
}

export interface SandboxAdmission {
  sandbox: Sandbox;
  sealedSecrets: string | null;
  idempotency: { key: string; requestMac: string; notBeforeIso: string } | null;
  nowMs: number;
  /** Runs inside the insert's transaction, synchronously; throwing refuses the create. */
  check(usage: TeamUsage): void;
}

export type AdmissionResult = { created: true; sandbox: Sandbox } | { created: false; sandbox: Sandbox; requestMac: string };

export type SandboxPatch = Partial<Omit<Sandbox, "id" | "team_id" | "created_at">>;

/**
 * A sandboxes row as both databases return it: the JSON columns as text, `seq` (the list order),
 * nested_virtualization a boolean on PostgreSQL and 0/1 on SQLite.
 */
export type SandboxTableRow = Omit<Sandbox, "environment_vars" | "labels" | "secrets" | "nested_virtualization"> & {
  seq: number;
  environment_vars: string;
  labels: string;
  secrets?: string;
  nested_virtualization?: boolean | number | null;
};

export function sandboxFromRow(r: SandboxTableRow): Sandbox {
  const { seq: _seq, ...rest } = r;
  return {
    ...rest,
    environment_vars: JSON.parse(r.environment_vars),
    labels: JSON.parse(r.labels),
    secrets: JSON.parse(r.secrets ?? "{}"),
    nested_virtualization: Boolean(r.nested_virtualization),
  };
}

/** A checkpoint with the fields only the server sees (where its layer and base live). */
export interface CheckpointRow extends Omit<Checkpoint, "has_memory"> {
  /** Memory checkpoints: the saved RAM + device state, and the VM shape it needs. */
  mem_key: string | null;
  mem_sha256: string | null;
  cpu_cores: number | null;
  memory_mb: number | null;
  /** The machine the memory state loads into (`tcg`, `kvm:host/...+nested`: see machineOf); null without memory. */
  machine?: string | null;
  image_digest: string | null;
  /**
   * The image base's name (ResolvedImage.base: the image's digest), the same on every host; a row
   * from before names may hold a path (never given to a host: ensureBase resolves the image again).
   */
  base: string;
  sha256: string | null;
  blob_key: string | null;
}

export type CheckpointPatch = Partial<Omit<CheckpointRow, "id" | "team_id" | "sandbox_id" | "created_at">>;

/** A sandbox's network: its pool slot (null once released) and its egress policy. */
/** What `revokeApiKeyKeepingAdmin` did. */
export type RevokeOutcome = "revoked" | "not_found" | "already_revoked" | "last_admin";

/** A network's new egress policy (`updateNetworkPolicy`). */
export interface NetworkPolicyUpdate {
  mode: NetworkMode;
  allowlist: string[];
  denylist: string[];
  updated_at: string;
}

export interface NetworkRow {
  sandbox_id: string;
  enabled: boolean;
  slot: number | null;
  mode: NetworkMode;
  allowlist: string[];
  denylist: string[];
  /** name -> HOST:PORT */
  tunnels: Record<string, string>;
  generation: number;
  applied: boolean;
  updated_at: string;
}

/** A port of a sandbox reachable through the proxy; the token itself is never stored. */
export interface ExposedPortRow {
  sandbox_id: string;
  port: number;
  /** Hex sha256 of the port's current token. */
  token_sha256: string;
  created_at: string;
}

/**
 * A background job as persisted; live state (output sizes, exit) is read from the guest. The
 * tails are the last ones read from the guest, kept so a job whose machine died still shows them.
 */
export interface JobRow {
  id: string;
  team_id: string;
  sandbox_id: string;
  command: string;
  status: JobStatus;
  exit_code: number | null;
  stdout_bytes: number;
  stderr_bytes: number;
  stdout_tail: string;
  stderr_tail: string;
  /** PID of the in-guest wrapper that waits for the job and writes its exit status. */
  wrapper_pid: number | null;
  kill_requested: boolean;
  error_reason: string | null;
  started_at: string;
  ended_at: string | null;
}

export type JobPatch = Partial<Omit<JobRow, "id" | "team_id" | "sandbox_id" | "command" | "started_at">>;

/** A job just launched: RUNNING under its wrapper, no output yet. */
export function runningJobRow(
  job: Pick<JobRow, "id" | "team_id" | "sandbox_id" | "command" | "wrapper_pid" | "started_at">,
): JobRow {
  return {
    ...job,
    status: "RUNNING",
    exit_code: null,
    stdout_bytes: 0,
    stderr_bytes: 0,
    stdout_tail: "",
    stderr_tail: "",
    kill_requested: false,
    error_reason: null,
    ended_at: null,
  };
}

export type MeterKind = "sandbox" | "checkpoint" | "upload" | "volume";

/**
 * One metered interval: a sandbox in a billed status (RUNNING, PAUSED), a DURABLE checkpoint at
 * one stored size, or a checkpoint's one-off upload charge (an instant: start_ms = end_ms).
 */
export interface MeterRecord {
  id: number;
  kind: MeterKind;
  /** The sandbox (kind sandbox) or checkpoint (checkpoint, upload) metered. */
  subject_id: string;
  /** The sandbox the record bills to (a checkpoint's source sandbox). */
  sandbox_id: string;
  team_id: string;
  /** The sandbox's status, or the checkpoint's state. */
  state: string;
  vcpus: number;
  memory_gib: number;
  disk_gib: number;
  stored_bytes: number;
  start_ms: number;
  /** null: still open (billed up to now). */
  end_ms: number | null;
}

/** A record with its sandbox's labels (JSON), for grouping. */
export type MeterRecordWithLabels = MeterRecord & { labels: string | null };
