import {
  type CreateSandboxParams,
  DEFAULT_TEAM_LIMITS,
  type ErrorCode,
  type Sandbox,
  SandtreeError,
  type TeamLimits,
  type TeamUsage,
} from "@sandtree/protocol";
import type { Store } from "../store/store.js";
import { maskSecrets, type SecretBox } from "./secret-box.js";

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
  /** Refuses a create past the team's monthly budget (set by the metering service). */
  private budgetCheck: ((teamId: string) => void) | null = null;
  /** Told of every refusal (quota, rate limit, budget): the metrics count them. */
  private readonly refusalListeners: Array<(code: ErrorCode) => void> = [];

  constructor(
    private readonly store: Store,
    private readonly box: SecretBox,
  ) {}

  setBudgetCheck(check: (teamId: string) => void): void {
    this.budgetCheck = check;
  }

  onRefusal(listener: (code: ErrorCode) => void): void {
    this.refusalListeners.push(listener);
  }

  limits(teamId: string): TeamLimits {
    return { ...DEFAULT_TEAM_LIMITS, ...this.store.getTeamLimitOverrides(teamId) };
  }

  /** The sandbox an unexpired idempotency key already created (checked before slow image checks). */
  replay(teamId: string, params: CreateSandboxParams, nowMs = Date.now()): Sandbox | undefined {
    if (params.idempotency_key === undefined) return undefined;
    const r = this.store.findIdempotent(teamId, params.idempotency_key, this.notBefore(nowMs));
    if (!r) return undefined;
    this.assertSameRequest(params, r.requestMac);
    return r.sandbox;
  }

  /** Atomically: replay an idempotency key, or check limits and insert. */
  admit(sandbox: Sandbox, params: CreateSandboxParams, nowMs = Date.now()): { sandbox: Sandbox; created: boolean } {
    const secrets = params.secrets ?? {};
    const hasSecrets = Object.keys(secrets).length > 0;
    const result = this.store.admitSandbox({
      sandbox: { ...sandbox, secrets: maskSecrets(secrets) },
      sealedSecrets: hasSecrets ? this.box.seal(secrets, sandbox.id) : null,
      idempotency:
        params.idempotency_key === undefined
          ? null
          : { key: params.idempotency_key, requestMac: this.requestMac(params), notBeforeIso: this.notBefore(nowMs) },
      nowMs,
      check: (usage) => {
        try {
          this.budgetCheck?.(sandbox.team_id);
          this.check(sandbox, this.limits(sandbox.team_id), usage, nowMs);
        } catch (err) {
          if (err instanceof SandtreeError) for (const l of this.refusalListeners) l(err.code);
          throw err;
        }
      },
    });
    if (!result.created) this.assertSameRequest(params, result.requestMac);
    return { sandbox: result.sandbox, created: result.created };
  }

  /** The secrets of a sandbox in plaintext, for exec environments only. */
  secretsOf(sandboxId: string): Record<string, string> {
    const sealed = this.store.getSealedSecrets(sandboxId);
    return sealed === undefined ? {} : this.box.open<Record<string, string>>(sealed, sandboxId);
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

  private check(sb: Sandbox, l: TeamLimits, u: TeamUsage, nowMs: number): void {
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
      if (count < limit) return;
      // Admitted again once enough of the window's creations have aged out of it.
      const since = new Date(nowMs - windowMs).toISOString();
      const oldest = limit === 0 ? undefined : this.store.nthCreationSince(sb.team_id, since, count - limit);
      const waitMs = oldest === undefined ? windowMs : Date.parse(oldest) + windowMs - nowMs;
      throw new SandtreeError(code, `team rate limit: ${count} sandboxes created in the last ${what} (limit ${limit})`, {
        limit,
        used: count,
        retry_after_seconds: Math.max(1, Math.ceil(waitMs / 1000)),
      });
    };
    rate("RATE_LIMIT_BURST", BURST_MS, u.creations_last_10s, l.max_creations_per_10s, "10 seconds");
    rate("RATE_LIMIT_HOURLY", HOUR_MS, u.creations_last_hour, l.max_creations_per_hour, "hour");
    quota("QUOTA_SANDBOXES", "active sandboxes", u.active_sandboxes, 1, l.max_active_sandboxes);
    quota("QUOTA_VCPUS", "vCPUs", u.vcpus, sb.cpu_cores, l.max_vcpus);
    quota("QUOTA_MEMORY", "memory GiB", u.memory_gb, sb.memory_gb, l.max_memory_gb);
    quota("QUOTA_STORAGE", "storage GiB", u.storage_gb, sb.disk_size_gb, l.max_storage_gb);
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
