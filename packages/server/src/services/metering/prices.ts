import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";

/** One price list, in force from `effective_from` until the next one's. */
export const PriceEntry = z.strictObject({
  effective_from: z.iso.datetime({ offset: true }).default("1970-01-01T00:00:00Z"),
  vcpu_hour_usd: z.number().min(0).default(0.02),
  memory_gib_hour_usd: z.number().min(0).default(0.0125),
  disk_gib_hour_usd: z.number().min(0).default(0.0002),
  /** Checkpoint storage per GiB-month of 730 hours, billed by the hour's fraction. */
  checkpoint_gib_month_usd: z.number().min(0).default(0.1),
  /** Volume storage (bytes its files take) per GiB-month of 730 hours, billed by the hour's fraction. */
  volume_gib_month_usd: z.number().min(0).default(0.1),
});
export type PriceEntry = z.infer<typeof PriceEntry>;

/** A price table: one entry, or several with effective_from times (past usage keeps its prices). */
export const PriceTable = z.union([PriceEntry, z.array(PriceEntry).min(1)]).transform((v) => (Array.isArray(v) ? v : [v]));
export type PriceTableInput = z.input<typeof PriceTable>;

export const HOURS_PER_MONTH = 730;

/** A price in force over a span, its rates per second (sandboxes) and per GiB-hour (checkpoints). */
export interface Price {
  fromMs: number;
  vcpuSecond: number;
  memoryGibSecond: number;
  diskGibSecond: number;
  checkpointGibHour: number;
  volumeGibHour: number;
}

/** The table sorted by effective time; the earliest entry also covers everything before it. */
export function compilePrices(entries: readonly PriceEntry[]): Price[] {
  return entries
    .map((e) => ({
      fromMs: Date.parse(e.effective_from),
      vcpuSecond: e.vcpu_hour_usd / 3600,
      memoryGibSecond: e.memory_gib_hour_usd / 3600,
      diskGibSecond: e.disk_gib_hour_usd / 3600,
      checkpointGibHour: e.checkpoint_gib_month_usd / HOURS_PER_MONTH,
      volumeGibHour: e.volume_gib_month_usd / HOURS_PER_MONTH,
    }))
    .sort((a, b) => a.fromMs - b.fromMs);
}

/**
 * The price table of the configuration (an option, else SANDTREE_PRICES): either
 * JSON (an entry or an array of them) or the path of a JSON file. Unset: the defaults.
 */
export function loadPriceTable(raw: string | PriceTableInput | undefined): PriceEntry[] {
  if (raw === undefined || raw === "") return PriceTable.parse({});
  let value: unknown = raw;
  if (typeof raw === "string") {
    const text = /^\s*[[{]/.test(raw) ? raw : existsSync(raw) ? readFileSync(raw, "utf8") : null;
    if (text === null) throw new Error(`SANDTREE_PRICES: ${raw} is neither JSON nor a file`);
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new Error(`SANDTREE_PRICES: invalid JSON: ${(err as Error).message}`);
    }
  }
  const r = PriceTable.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`invalid price table at ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`);
  }
  return r.data;
}
