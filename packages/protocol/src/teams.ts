import { z } from "zod";

// Teams, API keys and per-team limits (admin endpoints).

export const TeamName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "team names are 1-63 letters, digits, '.', '_', '-'");

export const CreateTeamRequest = z.strictObject({ name: TeamName });
export type CreateTeamRequest = z.input<typeof CreateTeamRequest>;

export const Team = z.object({ id: z.string(), name: z.string(), created_at: z.string() });
export type Team = z.infer<typeof Team>;

export const TeamList = z.object({ teams: z.array(Team) });
export type TeamList = z.infer<typeof TeamList>;

export const CreateApiKeyRequest = z.strictObject({
  /** The team's name. */
  team: TeamName,
  admin: z.boolean().default(false),
});
export type CreateApiKeyRequest = z.input<typeof CreateApiKeyRequest>;

/** A key as listed: never the secret, only its first characters. */
export const ApiKey = z.object({
  id: z.string(),
  team_id: z.string(),
  team: z.string(),
  prefix: z.string(),
  admin: z.boolean(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
});
export type ApiKey = z.infer<typeof ApiKey>;

/** The answer of a key creation: the only time the plaintext key is shown. */
export const CreatedApiKey = ApiKey.extend({ key: z.string() });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

export const ApiKeyList = z.object({ keys: z.array(ApiKey) });
export type ApiKeyList = z.infer<typeof ApiKeyList>;

const count = z.number().int().min(0).max(1_000_000_000);
/** A per-sandbox rate: at least 1 (a limit of nothing would stall the guest), at most a million. */
const rate = z.number().int().min(1).max(1_000_000);

export const TeamLimits = z.object({
  /** Sandboxes PENDING, PROVISIONING or RUNNING at once. */
  max_active_sandboxes: count,
  max_vcpus: count,
  max_memory_gb: z.number().min(0).max(1_000_000_000),
  /** Sum of disk_size_gb of active sandboxes. */
  max_storage_gb: count,
  max_creations_per_hour: count,
  /** Burst: creations within any 10 seconds. */
  max_creations_per_10s: count,
  /** Volumes not deleted. */
  max_volumes: count,
  /** Sum of size_gb of volumes not deleted. */
  max_volume_gb: count,
  /** Each sandbox's disk reads and writes, each, in MiB/s (its cgroup's blkio/io rate). */
  sandbox_disk_mbps: rate,
  /** Each sandbox's disk read and write operations, each, per second. */
  sandbox_disk_iops: rate,
  /** Each sandbox's network rate, each direction, in Mbit/s (tc on its tap). */
  sandbox_net_mbit: rate,
});
export type TeamLimits = z.infer<typeof TeamLimits>;

export const DEFAULT_TEAM_LIMITS: TeamLimits = {
  max_active_sandboxes: 1024,
  max_vcpus: 4096,
  max_memory_gb: 4096,
  max_storage_gb: 32_768,
  max_creations_per_hour: 102_400,
  max_creations_per_10s: 192,
  max_volumes: 100,
  max_volume_gb: 10_240,
  sandbox_disk_mbps: 256,
  sandbox_disk_iops: 10_000,
  sandbox_net_mbit: 1000,
};

/** PUT body: only the limits to change; `null` puts one back to its default. */
export const UpdateTeamLimitsRequest = z.strictObject(
  Object.fromEntries(Object.entries(TeamLimits.shape).map(([k, s]) => [k, s.nullable().optional()])) as {
    [K in keyof typeof TeamLimits.shape]: z.ZodOptional<z.ZodNullable<(typeof TeamLimits.shape)[K]>>;
  },
);
export type UpdateTeamLimitsRequest = z.input<typeof UpdateTeamLimitsRequest>;

export const TeamUsage = z.object({
  active_sandboxes: z.number(),
  vcpus: z.number(),
  memory_gb: z.number(),
  storage_gb: z.number(),
  creations_last_hour: z.number(),
  creations_last_10s: z.number(),
  /** Volumes not deleted (optional: older servers omit it). */
  volumes: z.number().optional(),
  /** Their size_gb summed. */
  volume_gb: z.number().optional(),
});
export type TeamUsage = z.infer<typeof TeamUsage>;

export const TeamLimitsResponse = z.object({ team: z.string(), limits: TeamLimits, usage: TeamUsage });
export type TeamLimitsResponse = z.infer<typeof TeamLimitsResponse>;
