import {
  type CreateSandboxParams,
  DEFAULT_TEAM_LIMITS,
  type ErrorCode,
  type Sandbox,
  SandtreeError,
  type TeamLimits,
  type TeamUsage,
} from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import { maskSecrets, type SecretBox } from "../teams/secret-box.js";

const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
const HOUR_MS = 3_600_000;
const BURST_MS = 10_000;
/** Quotas free up when the team deletes sandboxes, which we cannot predict: a fixed hint. */
const QUOTA_RETRY_AFTER_S = 10;

/**
 * What decides whether a create may happen: per-team quotas and rate limits, idempotency keys,
 * and sealing secrets. The check runs inside the store's insert transaction.
 */
export class AdmissionService {
  /** Told of every refusal (quota, rate limit, budget): the metrics count them. */
  private readonly refusalListeners: Array<(code: ErrorCode) => void> = [];

  constructor(
    private readonly store: Store,
    private readonly box: SecretBox,
    /** Refuses a create past the team's monthly budget (the metering service's check). */
    private readonly budgetCheck: ((teamId: string) => Promise<void>) | null = null,
  ) {}

  onRefusal(listener: (code: ErrorCode) => void): void {
    this.refusalListeners.push(listener);
  }

  async limits(teamId: string): Promise<TeamLimits> {
    return { ...DEFAULT_TEAM_LIMITS, ...(await this.store.getTeamLimitOverrides(teamId)) };
  }

  /** The sandbox an unexpired idempotency key already created (checked before slow image checks). */
  async replay(teamId: string, params: CreateSandboxParams, nowMs = Date.now()): Promise<Sandbox | undefined> {
    if (params.idempotency_key === undefined) return undefined;
    const r = await this.store.findIdempotent(teamId, params.idempotency_key, this.notBefore(nowMs));
    if (!r) return undefined;
    this.assertSameRequest(params, r.requestMac);
    return r.sandbox;
  }

  /**
   * Atomically: replay an idempotency key, or check limits and insert. The team's limits and its
   * budget verdict are read just before the insert's transaction (whose check is synchronous);
   * a rate limit's retry hint is computed after the refusal.
   */
  async admit(
    sandbox: Sandbox,
    params: CreateSandboxParams,
    nowMs = Date.now(),
  ): Promise<{ sandbox: Sandbox; created: boolean }> {
    const secrets = params.secrets ?? {};
    const hasSecrets = Object.keys(secrets).length > 0;
    const budgetRefusal = await this.budgetRefusal(sandbox.team_id);
    const limits = await this.limits(sandbox.team_id);
    const result = await this.store
      .admitSandbox({
        sandbox: { ...sandbox, secrets: maskSecrets(secrets) },
        sealedSecrets: hasSecrets ? this.box.seal(secrets, sandbox.id) : null,
        idempotency:
          params.idempotency_key === undefined
            ? null
            : { key: params.idempotency_key, requestMac: this.requestMac(params), notBeforeIso: this.notBefore(nowMs) },
        nowMs,
        check: (usage) => {
          if (budgetRefusal) throw budgetRefusal;
          this.check(sandbox, limits, usage);
        },
      })
      .catch(async (err: unknown) => {
        const refusal = err instanceof RateRefusal ? await this.rateError(sandbox.team_id, err, nowMs) : err;
        if (refusal instanceof SandtreeError) for (const l of this.refusalListeners) l(refusal.code);
        throw refusal;
      });
    if (!result.created) this.assertSameRequest(params, result.requestMac);
    return { sandbox: result.sandbox, created: result.created };
  }

  /** The secrets of a sandbox in plaintext, for exec environments only. */
  async secretsOf(sandboxId: string): Promise<Record<string, string>> {
    const sealed = await this.store.getSealedSecrets(sandboxId);
    return sealed === undefined ? {} : this.box.open<Record<string, string>>(sealed, sandboxId);
  }

  /** The budget check's refusal (thrown inside the insert's transaction), or null. */
  private async budgetRefusal(teamId: string): Promise<unknown> {
    try {
      await this.budgetCheck?.(teamId);
      return null;
    } catch (err) {
      return err;
    }
  }

  /** A rate limit's refusal, with when enough of the window's creations will have aged out of it. */
  private async rateError(teamId: string, r: RateRefusal, nowMs: number): Promise<SandtreeError> {
    const since = new Date(nowMs - r.windowMs).toISOString();
    const oldest = r.limit === 0 ? undefined : await this.store.nthCreationSince(teamId, since, r.count - r.limit);
    const waitMs = oldest === undefined ? r.windowMs : Date.parse(oldest) + r.windowMs - nowMs;
    return new SandtreeError(r.code, `team rate limit: ${r.count} sandboxes created in the last ${r.what} (limit ${r.limit})`, {
      limit: r.limit,
      used: r.count,
      retry_after_seconds: Math.max(1, Math.ceil(waitMs / 1000)),
    });
  }

  private notBefore(nowMs: number): string {
    return new Date(nowMs - IDEMPOTENCY_TTL_MS).toISOString();
  }

  private assertSameRequest(params: CreateSandboxParams, mac: string): void {
    if (this.requestMac(params) !== mac) {
      throw new SandtreeError(
        "IDEMPOTENCY_MISMATCH",
        "this idempotency_key was used with a different request body; use a new key for a different sandbox",
        { field: "idempotency_key" },
      );
    }
  }

  /** Keyed digest of the request (secrets included, so only a MAC: never a plain hash of them). */
  private requestMac(params: CreateSandboxParams): string {
    const { idempotency_key: _k, ...rest } = params;
    return this.box.mac(canonicalJson(rest));
  }

  private check(sb: Sandbox, l: TeamLimits, u: TeamUsage): void {
    const quota = (code: ErrorCode, what: string, used: number, adding: number, limit: number) => {
      if (used + adding > limit) {
        throw new SandtreeError(code, `team quota exceeded: ${what} ${used} in use + ${adding} requested > limit ${limit}`, {
          limit,
          used,
          requested: adding,
          retry_after_seconds: QUOTA_RETRY_AFTER_S,
        });
      }
    };
    const rate = (code: ErrorCode, windowMs: number, count: number, limit: number, what: string) => {
      // Its retry hint needs a store read, made after the transaction (rateError).
      if (count >= limit) throw new RateRefusal(code, windowMs, count, limit, what);
    };
    rate("RATE_LIMIT_BURST", BURST_MS, u.creations_last_10s, l.max_creations_per_10s, "10 seconds");
    rate("RATE_LIMIT_HOURLY", HOUR_MS, u.creations_last_hour, l.max_creations_per_hour, "hour");
    quota("QUOTA_SANDBOXES", "active sandboxes", u.active_sandboxes, 1, l.max_active_sandboxes);
    quota("QUOTA_VCPUS", "vCPUs", u.vcpus, sb.cpu_cores, l.max_vcpus);
    quota("QUOTA_MEMORY", "memory GiB", u.memory_gb, sb.memory_gb, l.max_memory_gb);
    quota("QUOTA_STORAGE", "storage GiB", u.storage_gb, sb.disk_size_gb, l.max_storage_gb);
  }
}

/** A rate limit hit inside the insert's transaction; admit() turns it into the SandtreeError. */
class RateRefusal extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly windowMs: number,
    readonly count: number,
    readonly limit: number,
    readonly what: string,
  ) {
    super(`rate limit ${code}`);
  }
}

/** JSON with object keys sorted, so equal requests give equal digests. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
  }
  return JSON.stringify(v);
}
