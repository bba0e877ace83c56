import type { UsageAmounts } from "@sandtree/protocol";
import type { MeterRecord } from "../../store/rows.js";
import type { Price } from "./prices.js";

// Pure arithmetic of metering: what a record costs over a span, split where prices change.

const GiB = 1024 ** 3;
/** The upload charge of a checkpoint turning DURABLE: one day of its storage. */
export const UPLOAD_HOURS = 24;

export function zeroAmounts(): UsageAmounts {
  return {
    vcpu_seconds: 0,
    memory_gib_seconds: 0,
    disk_gib_seconds: 0,
    checkpoint_gib_hours: 0,
    cost_usd: 0,
    volume_gib_hours: 0,
  };
}

export function addAmounts(into: UsageAmounts, a: UsageAmounts): void {
  into.vcpu_seconds += a.vcpu_seconds;
  into.memory_gib_seconds += a.memory_gib_seconds;
  into.disk_gib_seconds += a.disk_gib_seconds;
  into.checkpoint_gib_hours += a.checkpoint_gib_hours;
  into.cost_usd += a.cost_usd;
  into.volume_gib_hours += a.volume_gib_hours;
}

/** The price in force at `ms` (the earliest entry covers everything before it). */
export function priceAt(prices: readonly Price[], ms: number): Price {
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
