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
  NetworkRow,
  SandboxAdmission,
  SandboxFilter,
  SandboxPatch,
  TeamRow,
} from "./rows.js";

/** The job part of the persistence seam. */
export interface JobStore {
  insertJob(j: JobRow): void;
  getJob(teamId: string, sandboxId: string, jobId: string): JobRow | undefined;
  listJobs(teamId: string, sandboxId: string, limit: number): JobRow[];
  updateJob(id: string, patch: JobPatch): void;
  /** Records activity without bumping updated_at (idle timeouts). */
  touchSandbox(id: string, at: string): void;
}

/**
 * The metering part. Meter records are written by the store itself, in the transaction of each
 * sandbox status change and each checkpoint state or size change, stamped with the clock set
 * here (the metering service's).
 */
export interface MeterStore {
  setMeterClock(now: () => number): void;
  listMeterRecords(q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean }): MeterRecordWithLabels[];
  meterRecordsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): MeterRecord[];
  /** Seeds records as they are (benchmarks, imports). */
  insertMeterRecords(records: ReadonlyArray<Omit<MeterRecord, "id">>): void;
  /** null: no budget. */
  getTeamBudget(teamId: string): number | null;
  setTeamBudget(teamId: string, usd: number | null): void;
  creationsBetween(q: { teamId?: string; fromIso: string; toIso: string }): Array<{ created_at: string; status: string }>;
  countRunning(teamId?: string): number;
  /** Called after every committed status change, with the patch that made it (the metrics). */
  onSandboxStatus(listener: (id: string, patch: SandboxPatch) => void): void;
  /** Sandboxes per status, all teams. */
  countByStatus(): Record<string, number>;
  /** stored_bytes of every DURABLE checkpoint. */
  durableCheckpointBytes(): number;
}

/**
 * The persistence seam: SQLite today, PostgreSQL later; each backend passes the same
 * conformance suite (test/store/conformance.ts). Its rows are in rows.ts. Sandbox status
 * changes are conditional (`from`) so concurrent operations (a delete racing a create) cannot
 * overwrite each other's transitions.
 */
export interface Store extends JobStore, MeterStore {
  createTeam(name: string): TeamRow;
  getTeamByName(name: string): TeamRow | undefined;
  countTeams(): number;
  createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): ApiKeyRow;
  findApiKey(keyHash: string): ApiKeyRow | undefined;
  listTeams(): TeamRow[];
  getTeam(id: string): TeamRow | undefined;
  getApiKey(id: string): ApiKeyRow | undefined;
  listApiKeys(): ApiKeyRow[];
  /** Sets revoked_at once; false when the key is unknown or already revoked. */
  revokeApiKey(id: string): boolean;
  countActiveAdminKeys(): number;
  /** Only the limits set for the team; the rest are defaults. */
  getTeamLimitOverrides(teamId: string): Partial<TeamLimits>;
  setTeamLimitOverrides(teamId: string, overrides: Partial<TeamLimits>): void;
  teamUsage(teamId: string, nowMs: number): TeamUsage;
  /** created_at of the team's n-th (0-based, oldest first) sandbox created after `sinceIso`. */
  nthCreationSince(teamId: string, sinceIso: string, n: number): string | undefined;
  /**
   * One transaction: an unexpired idempotency key answers its sandbox; otherwise `check` runs
   * against the team's usage (throwing refuses) and the sandbox, its sealed secrets and the key
   * are inserted. So concurrent creates can never overshoot a quota.
   */
  admitSandbox(a: SandboxAdmission): AdmissionResult;
  getSealedSecrets(sandboxId: string): string | undefined;
  /** The sandbox an idempotency key created after `notBeforeIso`, with the request's MAC. */
  findIdempotent(teamId: string, key: string, notBeforeIso: string): { sandbox: Sandbox; requestMac: string } | undefined;

  insertSandbox(s: Sandbox): void;
  getSandbox(id: string, teamId?: string): Sandbox | undefined;
  listSandboxes(teamId: string, filter: SandboxFilter): { sandboxes: Sandbox[]; lastSeq: number | null };
  listSandboxesByStatus(statuses: readonly SandboxStatus[]): Sandbox[];
  /** Applies the patch only when the current status is one of `from` (if given); true when applied. */
  updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): boolean;

  addEvent(sandboxId: string, message: string): void;
  listEvents(sandboxId: string, limit: number): Array<{ at: string; message: string }>;
  insertCheckpoint(c: CheckpointRow): void;
  getCheckpoint(id: string, teamId?: string): CheckpointRow | undefined;
  listCheckpoints(filter: { teamId?: string; sandboxId?: string; states?: readonly CheckpointState[] }): CheckpointRow[];
  /** Applies the patch only when the current state is one of `from` (if given); true when applied. */
  updateCheckpoint(id: string, patch: CheckpointPatch, from?: readonly CheckpointState[]): boolean;
  deleteCheckpointRow(id: string): void;
  /** Checkpoints that active sandboxes were restored from. */
  checkpointsInUse(): string[];
  getNetwork(sandboxId: string): NetworkRow | undefined;
  putNetwork(row: NetworkRow): void;
  /** The sandbox's pool slot (the lowest free one, allocated atomically); null when the pool is full. */
  allocateNetworkSlot(sandboxId: string, slots: number): number | null;
  releaseNetworkSlot(sandboxId: string): void;
  listSlottedNetworks(): NetworkRow[];
  /** Exposes a port, or replaces the token hash of an exposed one (created_at stays). */
  upsertExposedPort(row: ExposedPortRow): ExposedPortRow;
  getExposedPort(sandboxId: string, port: number): ExposedPortRow | undefined;
  listExposedPorts(sandboxId: string): ExposedPortRow[];
  /** False when the port was not exposed. */
  deleteExposedPort(sandboxId: string, port: number): boolean;
  /** Every exposed port of the sandbox; how many there were. */
  deleteExposedPorts(sandboxId: string): number;
  close(): void;
}
