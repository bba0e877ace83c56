import type { CheckpointState, Sandbox, SandboxStatus, TeamLimits, TeamUsage } from "@sandtree/protocol";
import type { JobStore } from "./job-row.js";
import type { MeterStore } from "./metering-store.js";
import type { CheckpointPatch, CheckpointRow } from "./sqlite-checkpoints.js";
import type { NetworkRow } from "./sqlite-network.js";
import type { ExposedPortRow } from "./sqlite-ports.js";

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
  limit: number;
  /** Exclusive upper bound on the sequence number (pagination cursor). */
  beforeSeq?: number;
}

export interface SandboxAdmission {
  sandbox: Sandbox;
  sealedSecrets: string | null;
  idempotency: { key: string; requestMac: string; notBeforeIso: string } | null;
  nowMs: number;
  check(usage: TeamUsage): void;
}

export type AdmissionResult = { created: true; sandbox: Sandbox } | { created: false; sandbox: Sandbox; requestMac: string };

export type SandboxPatch = Partial<Omit<Sandbox, "id" | "team_id" | "created_at">>;

/**
 * The persistence seam: SQLite today, PostgreSQL later; each backend passes the same
 * conformance suite. Sandbox status changes are conditional (`from`) so concurrent
 * operations (a delete racing a create) cannot overwrite each other's transitions.
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
  /** Exposes a port, or replaces the token hash of an exposed one (created_at stays). */
  getNetwork(sandboxId: string): NetworkRow | undefined;
  putNetwork(row: NetworkRow): void;
  /** The sandbox's pool slot (the lowest free one, allocated atomically); null when the pool is full. */
  allocateNetworkSlot(sandboxId: string, slots: number): number | null;
  releaseNetworkSlot(sandboxId: string): void;
  listSlottedNetworks(): NetworkRow[];
  upsertExposedPort(row: ExposedPortRow): ExposedPortRow;
  getExposedPort(sandboxId: string, port: number): ExposedPortRow | undefined;
  listExposedPorts(sandboxId: string): ExposedPortRow[];
  /** False when the port was not exposed. */
  deleteExposedPort(sandboxId: string, port: number): boolean;
  /** Every exposed port of the sandbox; how many there were. */
  deleteExposedPorts(sandboxId: string): number;
  close(): void;
}
