import { USAGE_CSV_COLUMNS, type UsageAmounts, type UsageLine } from "@sandtree/protocol";

// What a usage report looks like: its line keys, the CSV export and the concurrency series.

/** The key of a UTC day or hour starting at `bucket` (ms). */
export function timeKey(group: "day" | "hour", bucket: number): string {
  const iso = new Date(bucket).toISOString();
  return group === "day" ? iso.slice(0, 10) : `${iso.slice(0, 13)}:00:00Z`;
}

/** The line key of a sandbox's labels (JSON; null: the sandbox is gone): one label's value, or every pair. */
export function labelKey(labelsJson: string | null, labelName: string | undefined): string {
  const labels: Record<string, string> = labelsJson ? JSON.parse(labelsJson) : {};
  if (labelName !== undefined) return labels[labelName] ?? "(none)";
  const pairs = Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`);
  return pairs.length > 0 ? pairs.join(",") : "(none)";
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
