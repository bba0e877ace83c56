import { type SandboxStatus, SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { countHolder } from "../support/count-holder.js";
import { expiryReason } from "./lifetime.js";
import type { SandboxService } from "./sandbox-service.js";

const ACTIVE: readonly SandboxStatus[] = ["PENDING", "PROVISIONING", "RUNNING"];
const ACTIVE_OR_PAUSED: readonly SandboxStatus[] = [...ACTIVE, "PAUSED"];
/** Activity is written to the store at most this often per sandbox (it is tracked in memory). */
const PERSIST_EVERY_MS = 5_000;

export interface TimeoutServiceDeps {
  store: Store;
  sandboxes: SandboxService;
  log: Logger;
  /** How often the reaper looks for expired sandboxes. */
  intervalMs: number;
  /**
   * Sandboxes this server leaves alone, read once per sweep (on a database several control
   * planes share: those placed on another control plane's own host, which times them out).
   */
  notMine?: () => Promise<ReadonlySet<string>>;
}

/**
 * Lifetime and idle timeouts: a reaper moves expired sandboxes to TIMEOUT and tears them down.
 * Requests that use a sandbox (commands, transfers, file reads, jobs' output) mark it active;
 * while one is in flight the sandbox is never idle.
 */
export class TimeoutService {
  private readonly lastActivity = new Map<string, number>();
  private readonly persistedAt = new Map<string, number>();
  private readonly inflight = new Map<string, number>();
  private readonly expiring = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> | null = null;

  constructor(private readonly deps: TimeoutServiceDeps) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweep()
        .then(() => {})
        .catch((err) => this.deps.log.error({ err }, "timeout sweep failed"))
        .finally(() => {
          this.sweeping = null;
        });
    }, this.deps.intervalMs);
    this.timer.unref();
  }

  /** Stops the reaper and waits for teardowns it started. Idempotent. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.sweeping;
    await Promise.allSettled([...this.expiring.values()]);
  }

  /** Marks the sandbox active now. Only for a sandbox of the team (other ids are ignored). */
  async touch(teamId: string, id: string): Promise<void> {
    const sb = await this.deps.store.getSandbox(id, teamId);
    if (!sb) return;
    const now = Date.now();
    this.lastActivity.set(id, now);
    if (now - (this.persistedAt.get(id) ?? 0) >= PERSIST_EVERY_MS) {
      this.persistedAt.set(id, now);
      await this.deps.store.touchSandbox(id, new Date(now).toISOString());
    }
  }

  /** An operation on the sandbox begins; call the returned function when it ends. */
  async begin(teamId: string, id: string): Promise<() => void> {
    await this.touch(teamId, id);
    if (!this.lastActivity.has(id)) return () => {};
    const release = countHolder(this.inflight, id);
    return () => {
      if (!release()) return;
      this.touch(teamId, id).catch((err: Error) =>
        this.deps.log.warn({ sandbox: id, err: err.message }, "could not record activity"),
      );
    };
  }

  /** begin() for callers that cannot wait (socket callbacks): the activity is recorded in the background. */
  beginSoon(teamId: string, id: string): () => void {
    const began = this.begin(teamId, id).catch((err: Error) => {
      this.deps.log.warn({ sandbox: id, err: err.message }, "could not record activity");
      return () => {};
    });
    return () => void began.then((end) => end());
  }

  /** Sets an active sandbox's lifetime to end `seconds` from now (its timeout_minutes follows). */
  async setLifetime(teamId: string, id: string, seconds: number): Promise<void> {
    const sb = await this.deps.sandboxes.get(teamId, id);
    const now = Date.now();
    const minutes = (now - Date.parse(sb.created_at) + seconds * 1000) / 60_000;
    const patch = { timeout_minutes: minutes, expires_at: new Date(now + seconds * 1000).toISOString() };
    if (!(await this.deps.store.updateSandbox(id, patch, ACTIVE_OR_PAUSED))) {
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} is ${sb.status}`, { id, status: sb.status });
    }
  }

  /** One pass of the reaper: starts tearing down expired sandboxes (without waiting) and names them. */
  async sweep(nowMs = Date.now()): Promise<string[]> {
    const expired: string[] = [];
    const active = await this.deps.store.listSandboxesByStatus(ACTIVE);
    const others = active.length > 0 && this.deps.notMine ? await this.deps.notMine() : null;
    for (const sb of active) {
      if (this.expiring.has(sb.id) || others?.has(sb.id)) continue;
      // The idle clock starts once the sandbox runs: a slow boot is not the user being idle.
      if (sb.status !== "RUNNING") this.lastActivity.set(sb.id, nowMs);
      const busy = (this.inflight.get(sb.id) ?? 0) > 0;
      const reason = expiryReason(busy ? { ...sb, idle_timeout_minutes: null } : sb, this.lastActivity.get(sb.id), nowMs);
      if (!reason) continue;
      expired.push(sb.id);
      const done = this.deps.sandboxes
        .expire(sb.id, reason)
        .then((changed) => {
          if (changed) this.deps.log.info({ sandbox: sb.id, reason }, "sandbox timed out");
        })
        .catch((err) => this.deps.log.error({ err, sandbox: sb.id }, "timeout teardown failed"))
        .finally(() => {
          this.expiring.delete(sb.id);
          this.forget(sb.id);
        });
      this.expiring.set(sb.id, done);
    }
    return expired;
  }

  private forget(id: string): void {
    this.lastActivity.delete(id);
    this.persistedAt.delete(id);
    this.inflight.delete(id);
  }
}
