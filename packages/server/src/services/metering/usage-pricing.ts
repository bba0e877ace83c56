import type { UsageAmounts, UsageGroup, UsageLine } from "@sandtree/protocol";
import { NO_BUCKETS_MS, type UsageSumRow, type UsageSumsQuery } from "../../store/usage-sums.js";
import type { Price } from "./prices.js";
import { addAmounts, UPLOAD_HOURS, zeroAmounts } from "./usage-calc.js";

// Prices the database's usage sums (store/usage-sums.ts): each row is the records of one price
// period, key and pair of time buckets; its amounts are priced with that period's price and
// spread over the buckets it covers. The work here grows with buckets and keys, not records.

const GiB = 1024 ** 3;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const EDGE_MS = Number.MAX_SAFE_INTEGER;

/** A span of the window under one price. */
export interface PricePeriod {
  fromMs: number;
  toMs: number;
  price: Price;
}

/** [fromMs, toMs) cut where prices change (the earliest entry covers everything before it). */
export function pricePeriods(prices: readonly Price[], fromMs = -EDGE_MS, toMs = EDGE_MS): PricePeriod[] {
  const out: PricePeriod[] = [];
  prices.forEach((price, k) => {
    const next = prices[k + 1];
    const a = Math.max(fromMs, k === 0 ? -EDGE_MS : price.fromMs);
    const b = Math.min(toMs, next ? next.fromMs : EDGE_MS);
    if (b > a) out.push({ fromMs: a, toMs: b, price });
  });
  return out;
}

/** The amounts of `ms`-weighted sums (vCPU-ms, GiB-ms, byte-ms of checkpoints and volumes) and upload bytes, at one price. */
function priced(
  vcpuMs: number,
  memoryMs: number,
  diskMs: number,
  bytesMs: number,
  volumeMs: number,
  uploadBytes: number,
  p: Price,
): UsageAmounts {
  const vcpu = vcpuMs / 1000;
  const memory = memoryMs / 1000;
  const disk = diskMs / 1000;
  const gibHours = bytesMs / 1000 / 3600 / GiB + (uploadBytes / GiB) * UPLOAD_HOURS;
  const volumeGibHours = volumeMs / 1000 / 3600 / GiB;
  return {
    vcpu_seconds: vcpu,
    memory_gib_seconds: memory,
    disk_gib_seconds: disk,
    checkpoint_gib_hours: gibHours,
    volume_gib_hours: volumeGibHours,
    cost_usd:
      vcpu * p.vcpuSecond +
      memory * p.memoryGibSecond +
      disk * p.diskGibSecond +
      gibHours * p.checkpointGibHour +
      volumeGibHours * p.volumeGibHour,
  };
}

export function bucketMsOf(group: UsageGroup): number {
  return group === "day" ? DAY_MS : group === "hour" ? HOUR_MS : NO_BUCKETS_MS;
}

/** The store's grouping key for a usage grouping (time groupings: buckets, no key). */
export function sumKeyOf(group: UsageGroup): UsageSumsQuery["key"] {
  return group === "sandbox" ? "sandbox" : group === "team" ? "team" : group === "label" ? "labels" : "none";
}

/**
 * Amounts per line key from the sums: `keyOf(row.key, bucket)` names a line. Rows spanning
 * several buckets add their head and tail to the first and last, and their per-millisecond sums
 * times the bucket size to each bucket between (a running sum over bucket numbers per period).
 */
export function spreadSums(
  rows: readonly UsageSumRow[],
  periods: readonly PricePeriod[],
  bucketMs: number,
  keyOf: (key: string | null, bucket: number) => string,
): Map<string, UsageAmounts> {
  const byKey = new Map<string, UsageAmounts>();
  const add = (key: string, a: UsageAmounts) => {
    let line = byKey.get(key);
    if (!line) byKey.set(key, (line = zeroAmounts()));
    addAmounts(line, a);
  };
  // Per period and key: bucket number -> change of [n, vcpus, memory, disk, bytes, volume bytes] there.
  const deltas = new Map<number, Map<string | null, { period: number; key: string | null; at: Map<number, number[]> }>>();
  const shift = (row: UsageSumRow, k: number, sign: number) => {
    let byKey = deltas.get(row.period);
    if (!byKey) deltas.set(row.period, (byKey = new Map()));
    let d = byKey.get(row.key);
    if (!d) byKey.set(row.key, (d = { period: row.period, key: row.key, at: new Map() }));
    let v = d.at.get(k);
    if (!v) d.at.set(k, (v = [0, 0, 0, 0, 0, 0]));
    v[0] = (v[0] as number) + sign * row.n;
    v[1] = (v[1] as number) + sign * row.vcpus;
    v[2] = (v[2] as number) + sign * row.memory_gib;
    v[3] = (v[3] as number) + sign * row.disk_gib;
    v[4] = (v[4] as number) + sign * row.stored_bytes;
    v[5] = (v[5] as number) + sign * row.volume_bytes;
  };
  for (const row of rows) {
    const p = periods[row.period]?.price;
    if (!p) throw new Error(`usage sums: no period ${row.period}`);
    add(
      keyOf(row.key, row.ka),
      priced(row.head_vcpu_ms, row.head_memory_ms, row.head_disk_ms, row.head_bytes_ms, row.head_volume_ms, row.upload_bytes, p),
    );
    if (row.kb > row.ka)
      add(
        keyOf(row.key, row.kb),
        priced(row.tail_vcpu_ms, row.tail_memory_ms, row.tail_disk_ms, row.tail_bytes_ms, row.tail_volume_ms, 0, p),
      );
    if (row.kb > row.ka + 1) {
      shift(row, row.ka + 1, 1);
      shift(row, row.kb, -1);
    }
  }
  for (const d of [...deltas.values()].flatMap((byKey) => [...byKey.values()])) {
    const p = periods[d.period]?.price as Price;
    const ks = [...d.at.keys()].sort((x, y) => x - y);
    const first = ks[0] ?? 0;
    const last = ks.at(-1) ?? 0;
    const level = [0, 0, 0, 0, 0, 0];
    for (let k = first; k < last; k++) {
      const change = d.at.get(k);
      if (change) for (let j = 0; j < 6; j++) level[j] = (level[j] ?? 0) + (change[j] ?? 0);
      const [n = 0, vcpus = 0, memory = 0, disk = 0, bytes = 0, volume = 0] = level;
      if (n > 0)
        add(
          keyOf(d.key, k),
          priced(vcpus * bucketMs, memory * bucketMs, disk * bucketMs, bytes * bucketMs, volume * bucketMs, 0, p),
        );
    }
  }
  return byKey;
}

/** Lines sorted by key, and their total (the sum of the lines, in that order). */
export function sortedLines(byKey: ReadonlyMap<string, UsageAmounts>): { lines: UsageLine[]; total: UsageAmounts } {
  const lines = [...byKey].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([key, a]) => ({ key, ...a }));
  const total = zeroAmounts();
  for (const l of lines) addAmounts(total, l);
  return { lines, total };
}
