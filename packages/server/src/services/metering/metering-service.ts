import { SandtreeError, type Stats, type TeamBudget, type UsageGroup, type UsageReport } from "@sandtree/protocol";
import type { TeamRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { HOUR_MS } from "../../store/usage-hours.js";
import type { Principal } from "../teams/auth-service.js";
import type { Clock } from "./clock.js";
import { compilePrices, type Price, type PriceEntry } from "./prices.js";
import { bucketMsOf, pricePeriods, sortedLines, spreadSums, sumKeyOf } from "./usage-pricing.js";
import { concurrencySeries, labelKey, timeKey, usageCsv } from "./usage-report.js";

/** How stale the month-to-date cost behind a budget check may be (it is a check at start, not a meter). */
const BUDGET_CHECK_MAX_AGE_MS = 5_000;
/** How old the all-teams cost a /metrics scrape answers may be before the scrape starts a refresh. */
const METRICS_COST_MAX_AGE_MS = 15_000;

/** Whose usage a call sees: one team, or every team (an admin key). */
export type UsageScope = { teamId: string } | { allTeams: true };

function teamOf(scope: UsageScope): string | undefined {
  return "teamId" in scope ? scope.teamId : undefined;
}

/** The start of the UTC calendar month that `ms` falls in. */
export function monthStart(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/**
 * Usage, cost and budgets from the store's meter records (which the store writes itself at
 * every transition, stamped with this service's clock) and the configured price table.
 */
export class MeteringService {
  private readonly prices: Price[];
  private readonly monthCache = new Map<string, { monthStartMs: number; usd: number; atMs: number }>();
  private allTeams: { monthStartMs: number; usd: number; atMs: number } | null = null;
  private allTeamsRefresh: Promise<{ monthStartMs: number; usd: number; atMs: number }> | null = null;

  constructor(
    private readonly store: Store,
    readonly clock: Clock,
    priceTable: readonly PriceEntry[],
  ) {
    this.prices = compilePrices(priceTable);
    store.setMeterClock(() => clock.now());
  }

  async usage(
    scope: UsageScope,
    q: { from?: string | undefined; to?: string | undefined; group_by: UsageGroup; label_key?: string | undefined },
  ): Promise<UsageReport> {
    const nowMs = this.clock.now();
    const fromMs = q.from ? Date.parse(q.from) : monthStart(nowMs);
    const toMs = q.to ? Date.parse(q.to) : nowMs;
    if (!(toMs > fromMs)) throw new SandtreeError("VALIDATION_FAILED", "to must be after from", { field: "to" });
    const { lines, total } = await this.lines(scope, fromMs, toMs, nowMs, q.group_by, q.label_key);
    return {
      from: new Date(fromMs).toISOString(),
      to: new Date(toMs).toISOString(),
      group_by: q.group_by,
      currency: "USD",
      lines,
      total,
    };
  }

  usageCsv(report: UsageReport): string {
    return usageCsv(report.lines, report.total);
  }

  /** Usage lines over [fromMs, toMs): the database's sums (store/usage-sums.ts), priced here. */
  private async lines(scope: UsageScope, fromMs: number, toMs: number, nowMs: number, group: UsageGroup, label?: string) {
    const periods = pricePeriods(this.prices, fromMs, toMs);
    if (periods.length === 0) return sortedLines(new Map());
    // Days, hours and teams in hour buckets: the store answers those from its hourly rollup (store/usage-hours.ts).
    const bucketMs = group === "day" || group === "hour" || group === "team" ? HOUR_MS : bucketMsOf(group);
    const rows = await this.store.usageSums({ teamId: teamOf(scope), nowMs, periods, bucketMs, key: sumKeyOf(group) });
    const labels = new Map<string | null, string>();
    const times = new Map<number, string>();
    const keyOf = (key: string | null, bucket: number): string => {
      if (group === "day" || group === "hour") {
        let k = times.get(bucket);
        if (k === undefined) times.set(bucket, (k = timeKey(group, bucket * bucketMs)));
        return k;
      }
      if (group !== "label") return key ?? "";
      let k = labels.get(key);
      if (k === undefined) labels.set(key, (k = labelKey(key, label)));
      return k;
    };
    return sortedLines(spreadSums(rows, periods, bucketMs, keyOf));
  }

  /** Metered cost of one team (or all) over [fromMs, toMs). */
  async costBetween(scope: UsageScope, fromMs: number, toMs: number): Promise<number> {
    return (await this.lines(scope, fromMs, toMs, this.clock.now(), "team")).total.cost_usd;
  }

  /**
   * The month-to-date cost of every team, for a /metrics scrape: answered from the last
   * computation (one aggregate) and refreshed behind the answer once it is 15 s old, so a scrape
   * takes the same time whatever the number of records. The first scrape of a month waits for it.
   */
  async metricsCost(): Promise<number> {
    const nowMs = this.clock.now();
    const cached = this.allTeams;
    if (cached && cached.monthStartMs === monthStart(nowMs)) {
      if (nowMs - cached.atMs > METRICS_COST_MAX_AGE_MS || nowMs < cached.atMs) this.refreshAllTeams().catch(() => {});
      return cached.usd;
    }
    return (await this.refreshAllTeams()).usd;
  }

  private refreshAllTeams(): Promise<{ monthStartMs: number; usd: number; atMs: number }> {
    this.allTeamsRefresh ??= (async () => {
      try {
        const nowMs = this.clock.now();
        const start = monthStart(nowMs);
        const fresh = { monthStartMs: start, usd: await this.costBetween({ allTeams: true }, start, nowMs), atMs: nowMs };
        this.allTeams = fresh;
        return fresh;
      } finally {
        this.allTeamsRefresh = null;
      }
    })();
    return this.allTeamsRefresh;
  }

  async stats(scope: UsageScope, q: { window_hours: number; bucket_minutes: number }): Promise<Stats> {
    const nowMs = this.clock.now();
    const bucketMs = q.bucket_minutes * 60_000;
    const buckets = Math.max(1, Math.ceil((q.window_hours * 3_600_000) / bucketMs));
    const fromMs = nowMs - buckets * bucketMs;
    const teamId = teamOf(scope);
    const team = teamId === undefined ? {} : { teamId };
    const records = await this.store.listMeterRecords({ ...team, fromMs, toMs: nowMs + 1 });
    const running = records.filter((r) => r.kind === "sandbox" && r.state === "RUNNING");
    const cost = await this.lines(scope, fromMs, nowMs, nowMs, "team");
    const concurrency = concurrencySeries(running, fromMs, bucketMs, buckets, nowMs);
    const series = concurrency.map((n, k) => ({
      t: new Date(fromMs + k * bucketMs).toISOString(),
      running: n,
      created: 0,
      failed: 0,
    }));
    let created = 0;
    let failed = 0;
    const fromIso = new Date(fromMs).toISOString();
    const toIso = new Date(nowMs + 1).toISOString();
    for (const c of await this.store.creationsBetween({ ...team, fromIso, toIso })) {
      const k = Math.min(buckets - 1, Math.floor((Date.parse(c.created_at) - fromMs) / bucketMs));
      const bucket = series[k];
      created++;
      if (bucket) bucket.created++;
      if (c.status === "ERROR") {
        failed++;
        if (bucket) bucket.failed++;
      }
    }
    return {
      from: fromIso,
      to: new Date(nowMs).toISOString(),
      created,
      failed,
      error_rate: created === 0 ? 0 : failed / created,
      running: await this.store.countRunning(teamId),
      estimated_cost_usd: cost.total.cost_usd,
      series,
    };
  }

  /** cost_usd so far of each sandbox (or checkpoint) of `ids`. */
  async costsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (ids.length === 0) return out;
    const periods = pricePeriods(this.prices);
    const kinds = subject === "sandbox" ? (["sandbox"] as const) : (["checkpoint", "upload"] as const);
    const rows = await this.store.usageSums({
      nowMs: this.clock.now(),
      periods,
      bucketMs: bucketMsOf("team"),
      key: "subject",
      subjects: { kinds, ids },
    });
    for (const [id, a] of spreadSums(rows, periods, bucketMsOf("team"), (key) => key ?? "")) out.set(id, a.cost_usd);
    return out;
  }

  /**
   * The team's metered cost in the current UTC month. `maxAgeMs`: an answer computed that
   * recently may be reused (the budget check on every create reads every record of the month).
   */
  async monthToDate(teamId: string, maxAgeMs = 0): Promise<{ monthStartMs: number; usd: number }> {
    const nowMs = this.clock.now();
    const start = monthStart(nowMs);
    const cached = this.monthCache.get(teamId);
    if (cached && cached.monthStartMs === start && nowMs - cached.atMs <= maxAgeMs && nowMs >= cached.atMs) return cached;
    const fresh = { monthStartMs: start, usd: await this.costBetween({ teamId }, start, nowMs), atMs: nowMs };
    this.monthCache.set(teamId, fresh);
    return fresh;
  }

  /**
   * Refuses what would start billing once the team's monthly budget is spent (402
   * BUDGET_EXCEEDED). Sandboxes already running are not stopped, so a month can end above it.
   * The month-to-date cost may be up to 5 s old.
   */
  async checkBudget(teamId: string): Promise<void> {
    const budget = await this.store.getTeamBudget(teamId);
    if (budget === null) return;
    const { usd, monthStartMs } = await this.monthToDate(teamId, BUDGET_CHECK_MAX_AGE_MS);
    if (usd < budget) return;
    throw new SandtreeError(
      "BUDGET_EXCEEDED",
      `the team's monthly budget of $${budget} is spent ($${usd.toFixed(2)} since ${new Date(monthStartMs).toISOString().slice(0, 10)}); raise it (sandtree team budget) or wait for next month`,
      { monthly_budget_usd: budget, month_to_date_usd: usd },
    );
  }

  /** A team may read its own budget; other teams' need an admin key (and answer as missing). */
  async budgetOf(p: Principal, teamName: string): Promise<TeamBudget> {
    const team = await this.store.getTeamByName(teamName);
    if (!team || (!p.isAdmin && team.id !== p.teamId))
      throw new SandtreeError("TEAM_NOT_FOUND", `team ${teamName} not found`, { team: teamName });
    return this.budgetView(team);
  }

  /** Admin only; null removes the budget. */
  async setBudget(p: Principal, teamName: string, usd: number | null): Promise<TeamBudget> {
    if (!p.isAdmin) throw new SandtreeError("FORBIDDEN", "setting a team budget needs an admin key");
    const team = await this.store.getTeamByName(teamName);
    if (!team) throw new SandtreeError("TEAM_NOT_FOUND", `team ${teamName} not found`, { team: teamName });
    await this.store.setTeamBudget(team.id, usd);
    return this.budgetView(team);
  }

  private async budgetView(team: TeamRow): Promise<TeamBudget> {
    const mtd = await this.monthToDate(team.id);
    return {
      team: team.name,
      monthly_budget_usd: await this.store.getTeamBudget(team.id),
      month_to_date_usd: mtd.usd,
      month_start: new Date(mtd.monthStartMs).toISOString(),
    };
  }
}
