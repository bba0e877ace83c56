import type { CheckpointState, Sandbox, SandboxStatus, TeamLimits, TeamUsage } from "@sandtree/protocol";
import type {
  AdmissionResult,
  ApiKeyRow,
  CheckpointPatch,
  CheckpointRow,
  ExposedPortRow,
  JobPatch,
  JobRow,
  MeterRecord,
  MeterRecordWithLabels,
  NetworkPolicyUpdate,
  NetworkRow,
  RevokeOutcome,
  SandboxAdmission,
  SandboxFilter,
  SandboxPatch,
  TeamRow,
} from "./rows.js";
import type { UsageSumRow, UsageSumsQuery } from "./usage-sums.js";

/** The job part of the persistence seam. */
export interface JobStore {
  insertJob(j: JobRow): Promise<void>;
  getJob(teamId: string, sandboxId: string, jobId: string): Promise<JobRow | undefined>;
  listJobs(teamId: string, sandboxId: string, limit: number): Promise<JobRow[]>;
  updateJob(id: string, patch: JobPatch): Promise<void>;
  /** Records activity without bumping updated_at (idle timeouts). */
  touchSandbox(id: string, at: string): Promise<void>;
}

/**
 * The metering part. Meter records are written by the store itself, in the transaction of each
 * sandbox status change and each checkpoint state or size change, stamped with the clock set
 * here (the metering service's).
 */
export interface MeterStore {
  setMeterClock(now: () => number): void;
  listMeterRecords(q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean }): Promise<MeterRecordWithLabels[]>;
  meterRecordsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): Promise<MeterRecord[]>;
  /** Usage added up by the database: a few rows per price period, key and bucket (usage-sums.ts). */
  usageSums(q: UsageSumsQuery): Promise<UsageSumRow[]>;
  /** Seeds records as they are (benchmarks, imports). */
  insertMeterRecords(records: ReadonlyArray<Omit<MeterRecord, "id">>): Promise<void>;
  /** null: no budget. */
  getTeamBudget(teamId: string): Promise<number | null>;
  setTeamBudget(teamId: string, usd: number | null): Promise<void>;
  creationsBetween(q: {
    teamId?: string;
    fromIso: string;
    toIso: string;
  }): Promise<Array<{ created_at: string; status: string }>>;
  countRunning(teamId?: string): Promise<number>;
  /** Called after every committed status change, with the patch that made it (the metrics). */
  onSandboxStatus(listener: (id: string, patch: SandboxPatch) => void): void;
  /** Sandboxes per status, all teams. */
  countByStatus(): Promise<Record<string, number>>;
  /** stored_bytes of every DURABLE checkpoint. */
  durableCheckpointBytes(): Promise<number>;
}

/**
 * The persistence seam: SQLite today, PostgreSQL later; each backend passes the same
 * conformance suite (test/store/conformance.ts). Every method is async (a networked backend);
 * each is atomic on its own, so a caller's read-then-write uses a conditional update. Its rows are in rows.ts. Sandbox status
 * changes are conditional (`from`) so concurrent operations (a delete racing a create) cannot
 * overwrite each other's transitions.
 */
export interface Store extends JobStore, MeterStore {
  createTeam(name: string): Promise<TeamRow>;
  getTeamByName(name: string): Promise<TeamRow | undefined>;
  countTeams(): Promise<number>;
  createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): Promise<ApiKeyRow>;
  findApiKey(keyHash: string): Promise<ApiKeyRow | undefined>;
  listTeams(): Promise<TeamRow[]>;
  getTeam(id: string): Promise<TeamRow | undefined>;
  getApiKey(id: string): Promise<ApiKeyRow | undefined>;
  listApiKeys(): Promise<ApiKeyRow[]>;
  /** Sets revoked_at once; false when the key is unknown or already revoked. */
  revokeApiKey(id: string): Promise<boolean>;
  countActiveAdminKeys(): Promise<number>;
  /**
   * Revokes a key unless it is the last active admin key, atomically (concurrent revokes from any
   * number of servers never leave no admin key).
   */
  revokeApiKeyKeepingAdmin(id: string): Promise<RevokeOutcome>;
  /** Only the limits set for the team; the rest are defaults. */
  getTeamLimitOverrides(teamId: string): Promise<Partial<TeamLimits>>;
  setTeamLimitOverrides(teamId: string, overrides: Partial<TeamLimits>): Promise<void>;
  /**
   * Replaces the team's overrides by `change(current)`, read and written atomically (the team's row
   * locked on PostgreSQL), so concurrent changes of different limits keep each other's. Answers them.
   */
  updateTeamLimitOverrides(
    teamId: string,
    change: (current: Partial<TeamLimits>) => Partial<TeamLimits>,
  ): Promise<Partial<TeamLimits>>;
  teamUsage(teamId: string, nowMs: number): Promise<TeamUsage>;
  /** created_at of the team's n-th (0-based, oldest first) sandbox created after `sinceIso`. */
  nthCreationSince(teamId: string, sinceIso: string, n: number): Promise<string | undefined>;
  /**
   * One transaction: an unexpired idempotency key answers its sandbox; otherwise `check` runs
   * against the team's usage (throwing refuses) and the sandbox, its sealed secrets and the key
   * are inserted. So concurrent creates can never overshoot a quota.
   */
  admitSandbox(a: SandboxAdmission): Promise<AdmissionResult>;
  getSealedSecrets(sandboxId: string): Promise<string | undefined>;
  /** The sandbox an idempotency key created after `notBeforeIso`, with the request's MAC. */
  findIdempotent(
    teamId: string,
    key: string,
    notBeforeIso: string,
  ): Promise<{ sandbox: Sandbox; requestMac: string } | undefined>;

  insertSandbox(s: Sandbox): Promise<void>;
  getSandbox(id: string, teamId?: string): Promise<Sandbox | undefined>;
  listSandboxes(teamId: string, filter: SandboxFilter): Promise<{ sandboxes: Sandbox[]; lastSeq: number | null }>;
  listSandboxesByStatus(statuses: readonly SandboxStatus[]): Promise<Sandbox[]>;
  /** Applies the patch only when the current status is one of `from` (if given); true when applied. */
  updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): Promise<boolean>;

  addEvent(sandboxId: string, message: string): Promise<void>;
  listEvents(sandboxId: string, limit: number): Promise<Array<{ at: string; message: string }>>;
  insertCheckpoint(c: CheckpointRow): Promise<void>;
  getCheckpoint(id: string, teamId?: string): Promise<CheckpointRow | undefined>;
  listCheckpoints(filter: { teamId?: string; sandboxId?: string; states?: readonly CheckpointState[] }): Promise<CheckpointRow[]>;
  /** Applies the patch only when the current state is one of `from` (if given); true when applied. */
  updateCheckpoint(id: string, patch: CheckpointPatch, from?: readonly CheckpointState[]): Promise<boolean>;
  deleteCheckpointRow(id: string): Promise<void>;
  /** Checkpoints that active sandboxes were restored from. */
  checkpointsInUse(): Promise<string[]>;
  getNetwork(sandboxId: string): Promise<NetworkRow | undefined>;
  putNetwork(row: NetworkRow): Promise<void>;
  /**
   * A new egress policy for an enabled network, in one conditional update: generation + 1, not
   * applied. Answers the row as updated, or undefined when there is no enabled network.
   */
  updateNetworkPolicy(sandboxId: string, policy: NetworkPolicyUpdate): Promise<NetworkRow | undefined>;
  /** Records whether `generation` is applied; a newer generation stored meanwhile is left alone. */
  setNetworkApplied(sandboxId: string, generation: number, applied: boolean): Promise<boolean>;
  /** The sandbox's pool slot (the lowest free one, allocated atomically); null when the pool is full. */
  allocateNetworkSlot(sandboxId: string, slots: number): Promise<number | null>;
  releaseNetworkSlot(sandboxId: string): Promise<void>;
  listSlottedNetworks(): Promise<NetworkRow[]>;
  /** Exposes a port, or replaces the token hash of an exposed one (created_at stays). */
  upsertExposedPort(row: ExposedPortRow): Promise<ExposedPortRow>;
  getExposedPort(sandboxId: string, port: number): Promise<ExposedPortRow | undefined>;
  listExposedPorts(sandboxId: string): Promise<ExposedPortRow[]>;
  /** False when the port was not exposed. */
  deleteExposedPort(sandboxId: string, port: number): Promise<boolean>;
  /** Every exposed port of the sandbox; how many there were. */
  deleteExposedPorts(sandboxId: string): Promise<number>;
  close(): Promise<void>;
}
