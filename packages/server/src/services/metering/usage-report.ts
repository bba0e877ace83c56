import { USAGE_CSV_COLUMNS, type UsageAmounts, type UsageGroup, type UsageLine } from "@sandtree/protocol";
import type { MeterRecordWithLabels } from "../../store/rows.js";
import type { Price } from "./prices.js";
import { addAmounts, amountsOver, clip, zeroAmounts } from "./usage-calc.js";

// Usage lines: records clipped to the period, split at day or hour boundaries when grouped by time.

const HOUR_MS = 3_600_000;

const DAY_MS = 24 * HOUR_MS;

/** The start of the UTC day or hour that `ms` falls in (UTC days are exactly 86,400,000 ms). */
function bucketStart(group: "day" | "hour", ms: number): number {
  const size = group === "day" ? DAY_MS : HOUR_MS;
  return Math.floor(ms / size) * size;
}

function timeKey(group: "day" | "hour", bucket: number): string {
  const iso = new Date(bucket).toISOString();
  return group === "day" ? iso.slice(0, 10) : `${iso.slice(0, 13)}:00:00Z`;
}

function labelKey(labelsJson: string | null, labelName: string | undefined): string {
  const labels: Record<string, string> = labelsJson ? JSON.parse(labelsJson) : {};
  if (labelName !== undefined) return labels[labelName] ?? "(none)";
  const pairs = Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`);
  return pairs.length > 0 ? pairs.join(",") : "(none)";
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

function csvField(v: string | number): string {
  const s = String(v);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** The CSV export: a header, one row per line, and a last row keyed "total". */
export function usageCsv(lines: readonly UsageLine[], total: UsageAmounts): string {
  const rows = [USAGE_CSV_COLUMNS.join(",")];
  for (const l of [...lines, { key: "total", ...total }]) rows.push(USAGE_CSV_COLUMNS.map((c) => csvField(l[c])).join(","));
  return `${rows.join("\n")}\n`;
}

/**
 * Most sandboxes RUNNING at once in each bucket of [fromMs, fromMs + n * bucketMs): a sweep
 * over the RUNNING records' starts and ends (an end before a start at the same instant).
 */
export function concurrencySeries(
  running: ReadonlyArray<{ start_ms: number; end_ms: number | null }>,
  fromMs: number,
  bucketMs: number,
  buckets: number,
  nowMs: number,
): number[] {
  const events: Array<[number, number]> = [];
  for (const r of running) {
    events.push([r.start_ms, 1]);
    events.push([r.end_ms ?? Math.max(nowMs, r.start_ms) + 1, -1]);
  }
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const out: number[] = [];
  let i = 0;
  let level = 0;
  for (let k = 0; k < buckets; k++) {
    const start = fromMs + k * bucketMs;
    const end = start + bucketMs;
    while (i < events.length && (events[i]?.[0] ?? 0) <= start) level += events[i++]?.[1] ?? 0;
    let max = level;
    while (i < events.length && (events[i]?.[0] ?? 0) < end) {
      level += events[i++]?.[1] ?? 0;
      max = Math.max(max, level);
    }
    out.push(max);
  }
  return out;
}
