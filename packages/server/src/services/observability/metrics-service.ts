import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { SandboxPatch } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { MeteringService } from "../metering/metering-service.js";
import type { AdmissionService } from "../sandboxes/admission-service.js";

/** How a sandbox started, for the create latency histogram. */
export type StartPath = "cold" | "warm" | "fork" | "memory";

/**
 * The Prometheus metrics (GET /metrics), in a registry of their own. Gauges read the database
 * at scrape time; counters and histograms are fed by the store's status changes, the admission
 * refusals and the exec routes (since this process started, as Prometheus counters are).
 */
export class MetricsService {
  readonly registry = new Registry();
  private readonly creations: Counter<"start_path">;
  private readonly failures: Counter<"code">;
  private readonly createSeconds: Histogram<"start_path">;
  private readonly execs: Counter<"outcome">;
  private readonly execSeconds: Histogram;
  private readonly refusals: Counter<"code">;

  constructor(store: Store, admission: AdmissionService, metering: MeteringService) {
    const registers = [this.registry];
    /** A counter of this registry with one label. */
    const counter = <L extends string>(name: string, help: string, label: L) =>
      new Counter<L>({ name, help, labelNames: [label], registers });
    new Gauge({
      name: "sandtree_sandboxes",
      help: "Sandboxes by status (all teams)",
      labelNames: ["status"],
      registers,
      async collect() {
        this.reset();
        for (const [status, n] of Object.entries(await store.countByStatus())) this.set({ status }, n);
      },
    });
    this.creations = counter(
      "sandtree_sandbox_creations_total",
      "Sandboxes that reached RUNNING, by start path (cold, warm, fork: restored from a checkpoint, memory)",
      "start_path",
    );
    this.failures = counter(
      "sandtree_sandbox_create_failures_total",
      "Creates that failed: refused with an error code, or ERROR while starting (code SANDBOX_ERROR)",
      "code",
    );
    this.createSeconds = new Histogram({
      name: "sandtree_sandbox_create_seconds",
      help: "From the create call to RUNNING, by start path",
      labelNames: ["start_path"],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64],
      registers,
    });
    this.execs = counter("sandtree_execs_total", "Exec calls, by outcome (ok: answered 2xx, error otherwise)", "outcome");
    this.execSeconds = new Histogram({
      name: "sandtree_exec_seconds",
      help: "Exec calls from request to the end of the answer",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    new Gauge({
      name: "sandtree_checkpoint_stored_bytes",
      help: "Bytes stored by DURABLE checkpoints (all teams)",
      registers,
      async collect() {
        this.set(await store.durableCheckpointBytes());
      },
    });
    new Gauge({
      name: "sandtree_metered_cost_usd",
      help: "Metered cost of the current UTC month so far, all teams (USD)",
      registers,
      // From a cache the metering service refreshes behind the scrape (at most 15 s old then).
      async collect() {
        this.set(await metering.metricsCost());
      },
    });
    this.refusals = counter(
      "sandtree_quota_refusals_total",
      "Creates refused by a quota, a rate limit or the budget, by code",
      "code",
    );
    admission.onRefusal((code) => {
      this.refusals.inc({ code });
    });
    // The listener is synchronous; the rows it reads come after (a metric missed on a failed read).
    store.onSandboxStatus((id, patch) => {
      this.countStatus(store, id, patch).catch(() => {});
    });
  }

  private async countStatus(store: Store, id: string, patch: SandboxPatch): Promise<void> {
    if (patch.status === "ERROR") {
      const sb = await store.getSandbox(id);
      if (sb && sb.started_at === null) this.failures.inc({ code: "SANDBOX_ERROR" });
    }
    if (patch.status !== "RUNNING" || patch.started_at === undefined || patch.started_at === null) return;
    const sb = await store.getSandbox(id);
    if (!sb) return;
    const path: StartPath =
      sb.start_path === "memory" ? "memory" : sb.source_checkpoint_id ? "fork" : sb.start_path === "warm" ? "warm" : "cold";
    this.creations.inc({ start_path: path });
    this.createSeconds.observe({ start_path: path }, (Date.parse(patch.started_at) - Date.parse(sb.created_at)) / 1000);
  }

  /** A create call answered with an error (its code). */
  createFailed(code: string): void {
    this.failures.inc({ code });
  }

  exec(ok: boolean, seconds: number): void {
    this.execs.inc({ outcome: ok ? "ok" : "error" });
    this.execSeconds.observe(seconds);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
