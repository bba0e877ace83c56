import { randomUUID } from "node:crypto";
import type { CheckpointState, Sandbox, SandboxStatus, TeamLimits, TeamUsage } from "@sandtree/protocol";
import Database from "better-sqlite3";
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
import { type SandboxTableRow, sandboxFromRow } from "./rows.js";
import * as ck from "./sqlite-checkpoints.js";
import { SqliteHostUrls } from "./sqlite-host-urls.js";
import * as hosts from "./sqlite-hosts.js";
import { SqliteImageAliases } from "./sqlite-image-aliases.js";
import * as jobs from "./sqlite-jobs.js";
import { SqliteKeyFingerprints } from "./sqlite-key-fingerprints.js";
import * as meter from "./sqlite-metering.js";
import { migrate } from "./sqlite-migrations.js";
import * as netw from "./sqlite-network.js";
import * as ports from "./sqlite-ports.js";
import * as sbx from "./sqlite-sandboxes.js";
import * as tenancy from "./sqlite-tenancy.js";
import { SqliteVolumeSyncs } from "./sqlite-volume-syncs.js";
import { SqliteVolumes } from "./sqlite-volumes.js";
import type { Store } from "./store.js";
import { StoreHooks } from "./store-hooks.js";
import type { UsageSumRow, UsageSumsQuery } from "./usage-sums.js";

const now = () => new Date().toISOString();

export class SqliteStore extends StoreHooks implements Store {
  private readonly db: Database.Database;

  constructor(file: string) {
    super();
    this.db = new Database(file);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("foreign_keys = ON");
    this.db.pragma("busy_timeout = 5000");
    migrate(this.db);
  }

  /** The fleet's hosts and placements, on this store's database connection. */
  hostStore(): hosts.SqliteHostStore {
    return new hosts.SqliteHostStore(this.db);
  }

  /** Where workers are reached (their own table, beside the host registry). */
  hostUrls(): SqliteHostUrls {
    return new SqliteHostUrls(this.db);
  }

  /** The admin-set image aliases (see image-aliases.ts). */
  imageAliases(): SqliteImageAliases {
    return new SqliteImageAliases(this.db);
  }

  volumes(): SqliteVolumes {
    return new SqliteVolumes(this.db, () => this.meterNow());
  }

  volumeSyncs(): SqliteVolumeSyncs {
    return new SqliteVolumeSyncs(this.db);
  }

  /** The fingerprints of the keys every server on this database shares. */
  keyFingerprints(): SqliteKeyFingerprints {
    return new SqliteKeyFingerprints(this.db);
  }

  async createTeam(name: string): Promise<TeamRow> {
    const row = { id: `team_${randomUUID().replaceAll("-", "").slice(0, 16)}`, name, created_at: now() };
    this.db.prepare("INSERT INTO teams (id, name, created_at) VALUES (@id, @name, @created_at)").run(row);
    return row;
  }

  async getTeamByName(name: string): Promise<TeamRow | undefined> {
    return this.db.prepare("SELECT * FROM teams WHERE name = ?").get(name) as TeamRow | undefined;
  }

  async countTeams(): Promise<number> {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM teams").get() as { n: number }).n;
  }

  async createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): Promise<ApiKeyRow> {
    const row = { id: `key_${randomUUID().replaceAll("-", "").slice(0, 16)}`, team_id: teamId, prefix, created_at: now() };
    this.db
      .prepare("INSERT INTO api_keys (id, team_id, key_hash, prefix, is_admin, created_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(row.id, teamId, keyHash, prefix, isAdmin ? 1 : 0, row.created_at);
    return { ...row, is_admin: isAdmin, revoked_at: null };
  }

  /** Prepared once: every request looks its key up. */
  private findKeyStmt: Database.Statement | null = null;
  async findApiKey(keyHash: string): Promise<ApiKeyRow | undefined> {
    this.findKeyStmt ??= this.db.prepare(
      "SELECT id, team_id, prefix, is_admin, created_at, revoked_at FROM api_keys WHERE key_hash = ?",
    );
    const r = this.findKeyStmt.get(keyHash) as (Omit<ApiKeyRow, "is_admin"> & { is_admin: number }) | undefined;
    return r ? { ...r, is_admin: r.is_admin === 1 } : undefined;
  }

  /** Every field of the sandbox; the optional ones absent are null, secrets (masked) {}. */
  async insertSandbox(s: Sandbox): Promise<void> {
    this.insertSandboxNow(s);
  }

  private insertSandboxNow(s: Sandbox): void {
    sbx.insertSandbox(this.db, s);
  }

  async getSandbox(id: string, teamId?: string): Promise<Sandbox | undefined> {
    return this.getSandboxNow(id, teamId);
  }

  /** Prepared once: every exec and file request reads its sandbox several times. */
  private sandboxStmt: Database.Statement | null = null;
  private teamSandboxStmt: Database.Statement | null = null;
  private getSandboxNow(id: string, teamId?: string): Sandbox | undefined {
    this.sandboxStmt ??= this.db.prepare("SELECT * FROM sandboxes WHERE id = ?");
    this.teamSandboxStmt ??= this.db.prepare("SELECT * FROM sandboxes WHERE id = ? AND team_id = ?");
    const r = (teamId === undefined ? this.sandboxStmt.get(id) : this.teamSandboxStmt.get(id, teamId)) as
      | SandboxTableRow
      | undefined;
    return r ? sandboxFromRow(r) : undefined;
  }

  async listSandboxes(teamId: string, filter: SandboxFilter): Promise<{ sandboxes: Sandbox[]; lastSeq: number | null }> {
    return sbx.listSandboxes(this.db, teamId, filter);
  }

  async listSandboxesByStatus(statuses: readonly SandboxStatus[]): Promise<Sandbox[]> {
    return sbx.listSandboxesByStatus(this.db, statuses);
  }

  async updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): Promise<boolean> {
    const { sql, params } = sbx.sandboxUpdate(id, patch, from);
    const stmt = this.db.prepare(sql);
    if (patch.status === undefined) return stmt.run(params).changes > 0;
    // A status change and its meter record commit together.
    const changed = this.db.transaction(() => {
      const applied = stmt.run(params).changes > 0;
      if (applied) meter.meterSandbox(this.db, id, this.meterNow());
      return applied;
    })();
    if (changed) this.statusChanged(id, patch);
    return changed;
  }

  async addEvent(sandboxId: string, message: string): Promise<void> {
    sbx.addEvent(this.db, sandboxId, message);
  }

  async listEvents(sandboxId: string, limit: number): Promise<Array<{ at: string; message: string }>> {
    return sbx.listEvents(this.db, sandboxId, limit);
  }

  async listTeams(): Promise<TeamRow[]> {
    return tenancy.listTeams(this.db);
  }
  async getTeam(id: string): Promise<TeamRow | undefined> {
    return tenancy.getTeam(this.db, id);
  }
  async getApiKey(id: string): Promise<ApiKeyRow | undefined> {
    return tenancy.getApiKey(this.db, id);
  }
  async listApiKeys(): Promise<ApiKeyRow[]> {
    return tenancy.listApiKeys(this.db);
  }
  async revokeApiKey(id: string): Promise<boolean> {
    return tenancy.revokeApiKey(this.db, id);
  }
  async countActiveAdminKeys(): Promise<number> {
    return tenancy.countActiveAdminKeys(this.db);
  }
  async revokeApiKeyKeepingAdmin(id: string): Promise<RevokeOutcome> {
    return tenancy.revokeKeepingAdmin(this.db, id);
  }
  async updateTeamLimitOverrides(teamId: string, change: (c: Partial<TeamLimits>) => Partial<TeamLimits>) {
    return tenancy.updateTeamLimitOverrides(this.db, teamId, change);
  }
  async getTeamLimitOverrides(teamId: string): Promise<Partial<TeamLimits>> {
    return tenancy.getTeamLimitOverrides(this.db, teamId);
  }
  async setTeamLimitOverrides(teamId: string, overrides: Partial<TeamLimits>): Promise<void> {
    tenancy.setTeamLimitOverrides(this.db, teamId, overrides);
  }
  async teamUsage(teamId: string, nowMs: number): Promise<TeamUsage> {
    return tenancy.teamUsage(this.db, teamId, nowMs);
  }
  async nthCreationSince(teamId: string, sinceIso: string, n: number): Promise<string | undefined> {
    return tenancy.nthCreationSince(this.db, teamId, sinceIso, n);
  }
  async admitSandbox(a: SandboxAdmission): Promise<AdmissionResult> {
    return tenancy.admitSandbox(this.db, a, { insert: (s) => this.insertSandboxNow(s), get: (id) => this.getSandboxNow(id) });
  }
  async getSealedSecrets(sandboxId: string): Promise<string | undefined> {
    return tenancy.getSealedSecrets(this.db, sandboxId);
  }
  async findIdempotent(
    teamId: string,
    key: string,
    notBeforeIso: string,
  ): Promise<{ sandbox: Sandbox; requestMac: string } | undefined> {
    return tenancy.findIdempotent(this.db, teamId, key, notBeforeIso, (id) => this.getSandboxNow(id));
  }

  async insertJob(j: JobRow): Promise<void> {
    jobs.insertJob(this.db, j);
  }
  async getJob(teamId: string, sandboxId: string, jobId: string): Promise<JobRow | undefined> {
    return jobs.getJob(this.db, teamId, sandboxId, jobId);
  }
  async listJobs(teamId: string, sandboxId: string, limit: number): Promise<JobRow[]> {
    return jobs.listJobs(this.db, teamId, sandboxId, limit);
  }
  async updateJob(id: string, patch: JobPatch): Promise<void> {
    jobs.updateJob(this.db, id, patch);
  }

  async touchSandbox(id: string, at: string): Promise<void> {
    this.db.prepare("UPDATE sandboxes SET last_activity_at = ? WHERE id = ?").run(at, id);
  }

  async insertCheckpoint(c: CheckpointRow): Promise<void> {
    ck.insertCheckpoint(this.db, c);
  }
  async getCheckpoint(id: string, teamId?: string): Promise<CheckpointRow | undefined> {
    return ck.getCheckpoint(this.db, id, teamId);
  }
  async listCheckpoints(filter: {
    teamId?: string;
    sandboxId?: string;
    states?: readonly CheckpointState[];
  }): Promise<CheckpointRow[]> {
    return ck.listCheckpoints(this.db, filter);
  }
  async updateCheckpoint(id: string, patch: CheckpointPatch, from?: readonly CheckpointState[]): Promise<boolean> {
    if (patch.state === undefined && patch.stored_bytes === undefined) return ck.updateCheckpoint(this.db, id, patch, from);
    return this.db.transaction(() => {
      const changed = ck.updateCheckpoint(this.db, id, patch, from);
      if (changed) meter.meterCheckpoint(this.db, id, this.meterNow());
      return changed;
    })();
  }
  async deleteCheckpointRow(id: string): Promise<void> {
    this.db.transaction(() => {
      ck.deleteCheckpointRow(this.db, id);
      meter.meterCheckpoint(this.db, id, this.meterNow());
    })();
  }
  async checkpointsInUse(): Promise<string[]> {
    return ck.checkpointsInUse(this.db);
  }

  async getNetwork(sandboxId: string): Promise<NetworkRow | undefined> {
    return netw.getNetwork(this.db, sandboxId);
  }
  async putNetwork(row: NetworkRow): Promise<void> {
    netw.putNetwork(this.db, row);
  }
  async updateNetworkPolicy(sandboxId: string, policy: NetworkPolicyUpdate): Promise<NetworkRow | undefined> {
    return netw.updateNetworkPolicy(this.db, sandboxId, policy);
  }
  async setNetworkApplied(sandboxId: string, generation: number, applied: boolean): Promise<boolean> {
    return netw.setNetworkApplied(this.db, sandboxId, generation, applied);
  }
  async allocateNetworkSlot(sandboxId: string, slots: number): Promise<number | null> {
    return netw.allocateSlot(this.db, sandboxId, slots);
  }
  async releaseNetworkSlot(sandboxId: string): Promise<void> {
    netw.releaseSlot(this.db, sandboxId);
  }
  async listSlottedNetworks(): Promise<NetworkRow[]> {
    return netw.listSlotted(this.db);
  }
  async upsertExposedPort(row: ExposedPortRow): Promise<ExposedPortRow> {
    return ports.upsertExposedPort(this.db, row);
  }
  async getExposedPort(sandboxId: string, port: number): Promise<ExposedPortRow | undefined> {
    return ports.getExposedPort(this.db, sandboxId, port);
  }
  async listExposedPorts(sandboxId: string): Promise<ExposedPortRow[]> {
    return ports.listExposedPorts(this.db, sandboxId);
  }
  async deleteExposedPort(sandboxId: string, port: number): Promise<boolean> {
    return ports.deleteExposedPort(this.db, sandboxId, port);
  }
  async deleteExposedPorts(sandboxId: string): Promise<number> {
    return ports.deleteExposedPorts(this.db, sandboxId);
  }

  async countByStatus(): Promise<Record<string, number>> {
    return meter.countByStatus(this.db);
  }
  async durableCheckpointBytes(): Promise<number> {
    return meter.durableCheckpointBytes(this.db);
  }
  async listMeterRecords(q: {
    teamId?: string;
    fromMs: number;
    toMs: number;
    withLabels?: boolean;
  }): Promise<MeterRecordWithLabels[]> {
    return meter.listMeterRecords(this.db, q);
  }
  async meterRecordsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): Promise<MeterRecord[]> {
    return meter.meterRecordsOf(this.db, subject, ids);
  }
  async usageSums(q: UsageSumsQuery): Promise<UsageSumRow[]> {
    return meter.usageSums(this.db, q);
  }
  async insertMeterRecords(records: ReadonlyArray<Omit<MeterRecord, "id">>): Promise<void> {
    this.db.transaction(() => {
      for (const r of records) meter.insertMeterRecord(this.db, r);
    })();
  }
  async getTeamBudget(teamId: string): Promise<number | null> {
    return meter.getTeamBudget(this.db, teamId);
  }
  async setTeamBudget(teamId: string, usd: number | null): Promise<void> {
    meter.setTeamBudget(this.db, teamId, usd);
  }
  async creationsBetween(q: {
    teamId?: string;
    fromIso: string;
    toIso: string;
  }): Promise<Array<{ created_at: string; status: string }>> {
    return meter.creationsBetween(this.db, q);
  }
  async countRunning(teamId?: string): Promise<number> {
    return meter.countRunning(this.db, teamId);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
