import type { UsageAmounts, UsageGroup, UsageLine } from "@sandtree/protocol";
import type { Price } from "../src/services/metering/prices.js";
import { addAmounts, UPLOAD_HOURS, zeroAmounts } from "../src/services/metering/usage-calc.js";
import { labelKey, timeKey } from "../src/services/metering/usage-report.js";
import type { MeterRecord, MeterRecordWithLabels } from "../src/store/rows.js";

// The oracle of usage-sql tests: metering's arithmetic as it was before the database added it up
// (every record read into JavaScript, split at price changes and at day or hour boundaries).
// Kept here only, to check the SQL sums against on random record sets.

const GiB = 1024 ** 3;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** The price in force at `ms` (the earliest entry covers everything before it). */
function priceAt(prices: readonly Price[], ms: number): Price {
  let p = prices[0];
  if (!p) throw new Error("empty price table");
  for (const q of prices) {
    if (q.fromMs <= ms) p = q;
    else break;
  }
  return p;
}

/** The next time after `ms` at which a price changes (Infinity: none). */
function nextPriceChange(prices: readonly Price[], ms: number): number {
  for (const q of prices) if (q.fromMs > ms) return q.fromMs;
  return Number.POSITIVE_INFINITY;
}

/** What a record uses and costs over [a, b) (ms, within the record), prices split where they change. */
export function amountsOver(r: MeterRecord, a: number, b: number, prices: readonly Price[]): UsageAmounts {
  const out = zeroAmounts();
  if (r.kind === "upload") {
    const gibHours = (r.stored_bytes / GiB) * UPLOAD_HOURS;
    out.checkpoint_gib_hours = gibHours;
    out.cost_usd = gibHours * priceAt(prices, r.start_ms).checkpointGibHour;
    return out;
  }
  for (let t = a; t < b; ) {
    const end = Math.min(b, nextPriceChange(prices, t));
    const p = priceAt(prices, t);
    const seconds = (end - t) / 1000;
    if (r.kind === "sandbox") {
      const cpu = r.vcpus * seconds;
      const mem = r.memory_gib * seconds;
      const disk = r.disk_gib * seconds;
      out.vcpu_seconds += cpu;
      out.memory_gib_seconds += mem;
      out.disk_gib_seconds += disk;
      out.cost_usd += cpu * p.vcpuSecond + mem * p.memoryGibSecond + disk * p.diskGibSecond;
    } else if (r.kind === "volume") {
      const gibHours = (r.stored_bytes / GiB) * (seconds / 3600);
      out.volume_gib_hours += gibHours;
      out.cost_usd += gibHours * p.volumeGibHour;
    } else {
      const gibHours = (r.stored_bytes / GiB) * (seconds / 3600);
      out.checkpoint_gib_hours += gibHours;
      out.cost_usd += gibHours * p.checkpointGibHour;
    }
    t = end;
  }
  return out;
}

/** The span of a record within [fromMs, toMs), an open one running until `nowMs`; null when none. */
export function clip(r: MeterRecord, fromMs: number, toMs: number, nowMs: number): [number, number] | null {
  if (r.kind === "upload") return r.start_ms >= fromMs && r.start_ms < toMs ? [r.start_ms, r.start_ms] : null;
  const a = Math.max(r.start_ms, fromMs);
  const b = Math.min(r.end_ms ?? Math.max(nowMs, r.start_ms), toMs);
  return b > a ? [a, b] : null;
}

/** Cost of each subject's records up to `nowMs` (a sandbox's or checkpoint's cost_usd so far). */
export function costBySubject(records: readonly MeterRecord[], prices: readonly Price[], nowMs: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of records) {
    const span = clip(r, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY, nowMs);
    if (!span) continue;
    out.set(r.subject_id, (out.get(r.subject_id) ?? 0) + amountsOver(r, span[0], span[1], prices).cost_usd);
  }
  return out;
}
/** The start of the UTC day or hour that `ms` falls in (UTC days are exactly 86,400,000 ms). */
function bucketStart(group: "day" | "hour", ms: number): number {
  const size = group === "day" ? DAY_MS : HOUR_MS;
  return Math.floor(ms / size) * size;
}

export interface UsageComputation {
  records: readonly MeterRecordWithLabels[];
  prices: readonly Price[];
  fromMs: number;
  toMs: number;
  nowMs: number;
  group: UsageGroup;
  labelKey?: string | undefined;
}

/** Lines sorted by key, and their total. */
export function usageLines(c: UsageComputation): { lines: UsageLine[]; total: UsageAmounts } {
  const byKey = new Map<string, UsageAmounts>();
  const add = (key: string, a: UsageAmounts) => {
    let line = byKey.get(key);
    if (!line) byKey.set(key, (line = zeroAmounts()));
    addAmounts(line, a);
  };
  // Keys of time buckets, made once per bucket (not per record).
  const keys = new Map<number, string>();
  const keyOf = (group: "day" | "hour", bucket: number) => {
    let k = keys.get(bucket);
    if (k === undefined) keys.set(bucket, (k = timeKey(group, bucket)));
    return k;
  };
  for (const r of c.records) {
    const span = clip(r, c.fromMs, c.toMs, c.nowMs);
    if (!span) continue;
    const [a, b] = span;
    if (c.group === "day" || c.group === "hour") {
      const size = c.group === "day" ? DAY_MS : HOUR_MS;
      if (r.kind === "upload") add(keyOf(c.group, bucketStart(c.group, a)), amountsOver(r, a, b, c.prices));
      for (let t = a; t < b; ) {
        const bucket = bucketStart(c.group, t);
        const end = Math.min(b, bucket + size);
        add(keyOf(c.group, bucket), amountsOver(r, t, end, c.prices));
        t = end;
      }
      continue;
    }
    const key =
      c.group === "sandbox" ? r.sandbox_id || r.subject_id : c.group === "team" ? r.team_id : labelKey(r.labels, c.labelKey);
    add(key, amountsOver(r, a, b, c.prices));
  }
  const lines = [...byKey].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([key, a]) => ({ key, ...a }));
  const total = zeroAmounts();
  for (const l of lines) addAmounts(total, l);
  return { lines, total };
}
