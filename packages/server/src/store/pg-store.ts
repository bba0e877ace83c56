import type { CheckpointState, Sandbox, SandboxStatus, TeamLimits, TeamUsage } from "@sandtree/protocol";
import type pg from "pg";
import * as ck from "./pg-checkpoints.js";
import { createPool, type Db, tx } from "./pg-db.js";
import { PgHostUrls } from "./pg-host-urls.js";
import { PgHostStore } from "./pg-hosts.js";
import { PgImageAliases } from "./pg-image-aliases.js";
import * as jobs from "./pg-jobs.js";
import { PgKeyFingerprints } from "./pg-key-fingerprints.js";
import * as meter from "./pg-metering.js";
import { migrate } from "./pg-migrations.js";
import * as netw from "./pg-network.js";
import * as sbx from "./pg-sandboxes.js";
import * as tenancy from "./pg-tenancy.js";
import { PgVolumeSyncs } from "./pg-volume-syncs.js";
import { PgVolumes } from "./pg-volumes.js";
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
import type { Store } from "./store.js";
import { StoreHooks } from "./store-hooks.js";
import type { UsageSumRow, UsageSumsQuery } from "./usage-sums.js";

/** The URL without its password, for messages. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(an unparsable URL)";
  }
}

/** Advisory lock keys of one team's admissions: (namespace, hash of the team id). */
const ADMISSION_NAMESPACE = 0x7374; // "st"

/**
 * The Store on PostgreSQL (the `pg` driver, a pool), for several servers sharing one database.
 * The same semantics as SqliteStore, made atomic across processes by PostgreSQL itself:
 * status changes are conditional UPDATEs whose row lock orders concurrent writers; each status or
 * checkpoint change commits with its meter records; admissions of one team are serialized by a
 * transaction-scoped advisory lock on the team (quotas and idempotency keys hold across servers);
 * network slots are handed out under another; migrations run once under a session lock.
 * Open it with `PgStore.open(url)`, which applies the migrations before answering.
 */
export class PgStore extends StoreHooks implements Store {
  private constructor(private readonly pool: pg.Pool) {
    super();
  }

  /** Connects, applies any pending migration (once, even with several servers starting together). */
  static async open(connectionString: string, opts: { poolSize?: number; connectTimeoutMs?: number } = {}): Promise<PgStore> {
    const pool = createPool(connectionString, opts.poolSize, opts.connectTimeoutMs);
    try {
      await migrate(pool);
    } catch (err) {
      await pool.end().catch(() => {});
      throw new Error(`could not open the PostgreSQL database ${redact(connectionString)}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return new PgStore(pool);
  }

  /** The host registry (hosts, placements) on this store's pool: shared by every control plane. */
  hostStore(): PgHostStore {
    return new PgHostStore(this.pool);
  }

  /** Where workers are reached (their own table, beside the host registry). */
  hostUrls(): PgHostUrls {
    return new PgHostUrls(this.pool);
  }

  /** The admin-set image aliases (see image-aliases.ts). */
  imageAliases(): PgImageAliases {
    return new PgImageAliases(this.pool);
  }

  /** Volumes and their mounts (see volume-rows.ts), metered on this store's clock. */
  volumes(): PgVolumes {
    return new PgVolumes(this.pool, () => this.meterNow());
  }

  volumeSyncs(): PgVolumeSyncs {
    return new PgVolumeSyncs(this.pool);
  }

  /** The fingerprints of the keys every server on this database shares. */
  keyFingerprints(): PgKeyFingerprints {
    return new PgKeyFingerprints(this.pool);
  }

  private get db(): Db {
    return this.pool;
  }

  createTeam(name: string): Promise<TeamRow> {
    return tenancy.createTeam(this.db, name);
  }
  getTeamByName(name: string): Promise<TeamRow | undefined> {
    return tenancy.getTeamByName(this.db, name);
  }
  countTeams(): Promise<number> {
    return tenancy.countTeams(this.db);
  }
  createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): Promise<ApiKeyRow> {
    return tenancy.createApiKey(this.db, teamId, keyHash, prefix, isAdmin);
  }
  findApiKey(keyHash: string): Promise<ApiKeyRow | undefined> {
    return tenancy.findApiKey(this.db, keyHash);
  }
  listTeams(): Promise<TeamRow[]> {
    return tenancy.listTeams(this.db);
  }
  getTeam(id: string): Promise<TeamRow | undefined> {
    return tenancy.getTeam(this.db, id);
  }
  getApiKey(id: string): Promise<ApiKeyRow | undefined> {
    return tenancy.getApiKey(this.db, id);
  }
  listApiKeys(): Promise<ApiKeyRow[]> {
    return tenancy.listApiKeys(this.db);
  }
  revokeApiKey(id: string): Promise<boolean> {
    return tenancy.revokeApiKey(this.db, id);
  }
  countActiveAdminKeys(): Promise<number> {
    return tenancy.countActiveAdminKeys(this.db);
  }
  revokeApiKeyKeepingAdmin(id: string): Promise<RevokeOutcome> {
    return tx(this.pool, (c) => tenancy.revokeKeepingAdmin(c, id));
  }
  updateTeamLimitOverrides(
    teamId: string,
    change: (c: Partial<TeamLimits>) => Partial<TeamLimits>,
  ): Promise<Partial<TeamLimits>> {
    return tx(this.pool, (c) => tenancy.updateTeamLimitOverrides(c, teamId, change));
  }
  getTeamLimitOverrides(teamId: string): Promise<Partial<TeamLimits>> {
    return tenancy.getTeamLimitOverrides(this.db, teamId);
  }
  setTeamLimitOverrides(teamId: string, overrides: Partial<TeamLimits>): Promise<void> {
    return tenancy.setTeamLimitOverrides(this.db, teamId, overrides);
  }
  teamUsage(teamId: string, nowMs: number): Promise<TeamUsage> {
    return tenancy.teamUsage(this.db, teamId, nowMs);
  }
  nthCreationSince(teamId: string, sinceIso: string, n: number): Promise<string | undefined> {
    return tenancy.nthCreationSince(this.db, teamId, sinceIso, n);
  }

  /**
   * One transaction holding the team's advisory lock from before the usage is read until the
   * insert commits: admissions of one team, from any server, run one after another, so the
   * quota check sees every earlier admission and an idempotency key creates one sandbox.
   */
  admitSandbox(a: SandboxAdmission): Promise<AdmissionResult> {
    const s = a.sandbox;
    return tx(this.pool, async (c): Promise<AdmissionResult> => {
      await c.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [ADMISSION_NAMESPACE, s.team_id]);
      if (a.idempotency) {
        const prior = await tenancy.findIdempotent(c, s.team_id, a.idempotency.key, a.idempotency.notBeforeIso, sbx.getSandbox);
        if (prior) return { created: false, ...prior };
      }
      a.check(await tenancy.teamUsage(c, s.team_id, a.nowMs));
      await sbx.insertSandbox(c, s);
      await tenancy.recordAdmission(c, s, a.sealedSecrets, a.idempotency);
      return { created: true, sandbox: (await sbx.getSandbox(c, s.id)) ?? s };
    });
  }
  getSealedSecrets(sandboxId: string): Promise<string | undefined> {
    return tenancy.getSealedSecrets(this.db, sandboxId);
  }
  findIdempotent(
    teamId: string,
    key: string,
    notBeforeIso: string,
  ): Promise<{ sandbox: Sandbox; requestMac: string } | undefined> {
    return tenancy.findIdempotent(this.db, teamId, key, notBeforeIso, sbx.getSandbox);
  }

  insertSandbox(s: Sandbox): Promise<void> {
    return sbx.insertSandbox(this.db, s);
  }
  getSandbox(id: string, teamId?: string): Promise<Sandbox | undefined> {
    return sbx.getSandbox(this.db, id, teamId);
  }
  listSandboxes(teamId: string, filter: SandboxFilter): Promise<{ sandboxes: Sandbox[]; lastSeq: number | null }> {
    return sbx.listSandboxes(this.db, teamId, filter);
  }
  listSandboxesByStatus(statuses: readonly SandboxStatus[]): Promise<Sandbox[]> {
    return sbx.listSandboxesByStatus(this.db, statuses);
  }
  /** A status change and its meter record commit together; listeners run after the commit. */
  async updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): Promise<boolean> {
    if (patch.status === undefined) return sbx.updateSandbox(this.db, id, patch, from);
    const changed = await tx(this.pool, async (c) => {
      const applied = await sbx.updateSandbox(c, id, patch, from);
      if (applied) await meter.meterSandbox(c, id, this.meterNow());
      return applied;
    });
    if (changed) this.statusChanged(id, patch);
    return changed;
  }
  addEvent(sandboxId: string, message: string): Promise<void> {
    return sbx.addEvent(this.db, sandboxId, message);
  }
  listEvents(sandboxId: string, limit: number): Promise<Array<{ at: string; message: string }>> {
    return sbx.listEvents(this.db, sandboxId, limit);
  }
  touchSandbox(id: string, at: string): Promise<void> {
    return sbx.touchSandbox(this.db, id, at);
  }

  insertJob(j: JobRow): Promise<void> {
    return jobs.insertJob(this.db, j);
  }
  getJob(teamId: string, sandboxId: string, jobId: string): Promise<JobRow | undefined> {
    return jobs.getJob(this.db, teamId, sandboxId, jobId);
  }
  listJobs(teamId: string, sandboxId: string, limit: number): Promise<JobRow[]> {
    return jobs.listJobs(this.db, teamId, sandboxId, limit);
  }
  updateJob(id: string, patch: JobPatch): Promise<void> {
    return jobs.updateJob(this.db, id, patch);
  }

  insertCheckpoint(c: CheckpointRow): Promise<void> {
    return ck.insertCheckpoint(this.db, c);
  }
  getCheckpoint(id: string, teamId?: string): Promise<CheckpointRow | undefined> {
    return ck.getCheckpoint(this.db, id, teamId);
  }
  listCheckpoints(filter: {
    teamId?: string;
    sandboxId?: string;
    states?: readonly CheckpointState[];
  }): Promise<CheckpointRow[]> {
    return ck.listCheckpoints(this.db, filter);
  }
  /** A state or size change and its meter records commit together. */
  updateCheckpoint(id: string, patch: CheckpointPatch, from?: readonly CheckpointState[]): Promise<boolean> {
    if (patch.state === undefined && patch.stored_bytes === undefined) return ck.updateCheckpoint(this.db, id, patch, from);
    return tx(this.pool, async (c) => {
      const changed = await ck.updateCheckpoint(c, id, patch, from);
      if (changed) await meter.meterCheckpoint(c, id, this.meterNow());
      return changed;
    });
  }
  deleteCheckpointRow(id: string): Promise<void> {
    return tx(this.pool, async (c) => {
      await ck.deleteCheckpointRow(c, id);
      await meter.meterCheckpoint(c, id, this.meterNow());
    });
  }
  checkpointsInUse(): Promise<string[]> {
    return ck.checkpointsInUse(this.db);
  }

  getNetwork(sandboxId: string): Promise<NetworkRow | undefined> {
    return netw.getNetwork(this.db, sandboxId);
  }
  putNetwork(row: NetworkRow): Promise<void> {
    return netw.putNetwork(this.db, row);
  }
  updateNetworkPolicy(sandboxId: string, policy: NetworkPolicyUpdate): Promise<NetworkRow | undefined> {
    return netw.updateNetworkPolicy(this.db, sandboxId, policy);
  }
  setNetworkApplied(sandboxId: string, generation: number, applied: boolean): Promise<boolean> {
    return netw.setNetworkApplied(this.db, sandboxId, generation, applied);
  }
  /** Under the slot lock, so servers sharing the database never hand out one slot twice. */
  allocateNetworkSlot(sandboxId: string, slots: number): Promise<number | null> {
    return tx(this.pool, async (c) => {
      await c.query("SELECT pg_advisory_xact_lock($1)", [netw.SLOT_LOCK.toString()]);
      return netw.allocateSlot(c, sandboxId, slots);
    });
  }
  releaseNetworkSlot(sandboxId: string): Promise<void> {
    return netw.releaseSlot(this.db, sandboxId);
  }
  listSlottedNetworks(): Promise<NetworkRow[]> {
    return netw.listSlotted(this.db);
  }
  upsertExposedPort(row: ExposedPortRow): Promise<ExposedPortRow> {
    return netw.upsertExposedPort(this.db, row);
  }
  getExposedPort(sandboxId: string, port: number): Promise<ExposedPortRow | undefined> {
    return netw.getExposedPort(this.db, sandboxId, port);
  }
  listExposedPorts(sandboxId: string): Promise<ExposedPortRow[]> {
    return netw.listExposedPorts(this.db, sandboxId);
  }
  deleteExposedPort(sandboxId: string, port: number): Promise<boolean> {
    return netw.deleteExposedPort(this.db, sandboxId, port);
  }
  deleteExposedPorts(sandboxId: string): Promise<number> {
    return netw.deleteExposedPorts(this.db, sandboxId);
  }

  countByStatus(): Promise<Record<string, number>> {
    return meter.countByStatus(this.db);
  }
  durableCheckpointBytes(): Promise<number> {
    return meter.durableCheckpointBytes(this.db);
  }
  listMeterRecords(q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean }): Promise<MeterRecordWithLabels[]> {
    return meter.listMeterRecords(this.db, q);
  }
  meterRecordsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): Promise<MeterRecord[]> {
    return meter.meterRecordsOf(this.db, subject, ids);
  }
  usageSums(q: UsageSumsQuery): Promise<UsageSumRow[]> {
    return meter.usageSums(this.pool, q);
  }
  insertMeterRecords(records: ReadonlyArray<Omit<MeterRecord, "id">>): Promise<void> {
    return tx(this.pool, (c) => meter.insertMeterRecords(c, records));
  }
  getTeamBudget(teamId: string): Promise<number | null> {
    return meter.getTeamBudget(this.db, teamId);
  }
  setTeamBudget(teamId: string, usd: number | null): Promise<void> {
    return meter.setTeamBudget(this.db, teamId, usd);
  }
  creationsBetween(q: {
    teamId?: string;
    fromIso: string;
    toIso: string;
  }): Promise<Array<{ created_at: string; status: string }>> {
    return meter.creationsBetween(this.db, q);
  }
  countRunning(teamId?: string): Promise<number> {
    return meter.countRunning(this.db, teamId);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
