import { z } from "zod";

// Metered usage, cost statistics and team budgets (GET /v1/usage, GET /v1/stats, /v1/teams/:name/budget).

export const USAGE_GROUPS = ["day", "hour", "label", "sandbox", "team"] as const;
export const UsageGroup = z.enum(USAGE_GROUPS);
export type UsageGroup = z.infer<typeof UsageGroup>;

const isoTime = z.iso.datetime({ offset: true });

export const UsageQuery = z.strictObject({
  /** Start of the period (inclusive); default: the start of the current UTC month. */
  from: isoTime.optional(),
  /** End of the period (exclusive); default: now. */
  to: isoTime.optional(),
  group_by: UsageGroup.default("day"),
  /** group_by=label: the label whose values make the lines (without it: every label set). */
  label_key: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/)
    .optional(),
  format: z.enum(["json", "csv"]).default("json"),
});
export type UsageQuery = z.input<typeof UsageQuery>;

export const UsageAmounts = z.object({
  vcpu_seconds: z.number(),
  memory_gib_seconds: z.number(),
  disk_gib_seconds: z.number(),
  /** Stored GiB-hours of DURABLE checkpoints, the upload charge (24 GiB-hours per GiB) included. */
  checkpoint_gib_hours: z.number(),
  cost_usd: z.number(),
  /** Stored GiB-hours of volumes (their files' bytes, measured at each write through the API and each read). Older servers omit it. */
  volume_gib_hours: z.number().default(0),
});
export type UsageAmounts = z.infer<typeof UsageAmounts>;

export const UsageLine = UsageAmounts.extend({ key: z.string() });
export type UsageLine = z.infer<typeof UsageLine>;

export const UsageReport = z.object({
  from: z.string(),
  to: z.string(),
  group_by: UsageGroup,
  currency: z.literal("USD"),
  lines: z.array(UsageLine),
  total: UsageAmounts,
});
export type UsageReport = z.infer<typeof UsageReport>;

/** The CSV export's columns, in order (the same as a line's fields). */
export const USAGE_CSV_COLUMNS = [
  "key",
  "vcpu_seconds",
  "memory_gib_seconds",
  "disk_gib_seconds",
  "checkpoint_gib_hours",
  "cost_usd",
  "volume_gib_hours",
] as const;

export const StatsQuery = z.strictObject({
  window_hours: z.coerce
    .number()
    .positive()
    .max(24 * 90)
    .default(24),
  bucket_minutes: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 60)
    .default(30),
});
export type StatsQuery = z.input<typeof StatsQuery>;

export const StatsBucket = z.object({
  /** The bucket's start. */
  t: z.string(),
  /** Most sandboxes RUNNING at once within the bucket. */
  running: z.number(),
  created: z.number(),
  failed: z.number(),
});
export type StatsBucket = z.infer<typeof StatsBucket>;

export const Stats = z.object({
  from: z.string(),
  to: z.string(),
  /** Sandboxes created in the window. */
  created: z.number(),
  /** Of those, how many ended ERROR. */
  failed: z.number(),
  /** failed / created (0 when none were created). */
  error_rate: z.number(),
  /** RUNNING now. */
  running: z.number(),
  /** Metered cost within the window, USD. */
  estimated_cost_usd: z.number(),
  series: z.array(StatsBucket),
});
export type Stats = z.infer<typeof Stats>;

export const TeamBudget = z.object({
  team: z.string(),
  /** null: no budget. */
  monthly_budget_usd: z.number().nullable(),
  /** Metered cost of the current UTC calendar month so far. */
  month_to_date_usd: z.number(),
  month_start: z.string(),
});
export type TeamBudget = z.infer<typeof TeamBudget>;

export const UpdateTeamBudgetRequest = z.strictObject({
  monthly_budget_usd: z.number().min(0).max(1_000_000_000).nullable(),
});
export type UpdateTeamBudgetRequest = z.input<typeof UpdateTeamBudgetRequest>;
