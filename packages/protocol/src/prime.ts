import { z } from "zod";

// The requests of the Prime Sandboxes wire API (the `prime_sandboxes` Python client, 0.5.x) that
// sandtree serves under /prime (docs/prime.md). Strict: a field sandtree does not know is refused,
// never dropped.

const StartCommand = z.strictObject({
  executable: z.string().min(1),
  args: z.array(z.string()).default([]),
});

export const PrimeCreateSandboxRequest = z.strictObject({
  name: z.string().min(1).max(63),
  docker_image: z.string().min(1).max(512).optional(),
  checkpoint_id: z.string().min(1).max(64).optional(),
  arch: z.enum(["amd64", "arm64"]).optional(),
  /** An object (0.5: executable and args, no shell) or a shell string (older clients). */
  start_command: z.union([StartCommand, z.string().min(1)]).optional(),
  cpu_cores: z.number().positive().default(1),
  memory_gb: z.number().positive().default(1),
  disk_size_gb: z.number().positive().optional(),
  gpu_count: z.number().int().min(0).default(0),
  gpu_type: z.string().optional(),
  vm: z.boolean().optional(),
  network_allowlist: z.array(z.string()).optional(),
  network_denylist: z.array(z.string()).optional(),
  timeout_minutes: z.number().int().default(60),
  idle_timeout_minutes: z.number().int().min(1).optional(),
  environment_vars: z.record(z.string(), z.string()).optional(),
  secrets: z.record(z.string(), z.string()).optional(),
  labels: z.array(z.string()).default([]),
  team_id: z.string().optional(),
  region: z.string().optional(),
  advanced_configs: z.record(z.string(), z.unknown()).optional(),
  idempotency_key: z.string().min(1).max(128).optional(),
  volumes: z.array(z.unknown()).optional(),
});
export type PrimeCreateSandboxRequest = z.output<typeof PrimeCreateSandboxRequest>;

const oneOrMany = z.union([z.string(), z.array(z.string())]);

export const PrimeListQuery = z.strictObject({
  page: z.coerce.number().int().min(1).default(1),
  per_page: z.coerce.number().int().min(1).max(1000).default(50),
  status: z.string().optional(),
  labels: oneOrMany.optional(),
  is_active: z.enum(["true", "false", "True", "False"]).optional(),
  team_id: z.string().optional(),
  user_id: z.string().optional(),
});

export const PrimeBulkDeleteRequest = z.strictObject({
  sandbox_ids: z.array(z.string().min(1).max(64)).max(1000).optional(),
  labels: z.array(z.string()).optional(),
  team_id: z.string().optional(),
  user_id: z.string().optional(),
  all_users: z.boolean().default(false),
});

export const PrimeSandboxIds = z.strictObject({ sandbox_ids: z.array(z.string().min(1).max(64)).min(1).max(100) });
export const PrimeCheckpointIds = z.strictObject({ checkpoint_ids: z.array(z.string().min(1).max(64)).min(1).max(100) });

export const PrimeJobsBatchRequest = z.strictObject({
  jobs: z
    .array(z.strictObject({ sandbox_id: z.string().min(1).max(64), job_id: z.string().min(1).max(64) }))
    .min(1)
    .max(100),
});

/** Exactly one list is non-null: `{allowlist: null, denylist: []}` allows everything, the reverse denies it. */
export const PrimeEgressPolicy = z
  .strictObject({
    allowlist: z.array(z.string()).nullable().optional(),
    denylist: z.array(z.string()).nullable().optional(),
  })
  .refine((p) => (p.allowlist == null) !== (p.denylist == null), {
    message: "give exactly one of allowlist or denylist",
    path: ["allowlist"],
  });

export const PrimeFileQuery = z.strictObject({
  path: z.string().min(1).max(4096),
  sandbox_id: z.string().optional(),
});

export const PrimeReadFileQuery = z.strictObject({
  path: z.string().min(1).max(4096),
  /** Negative: that many bytes before the end (a tail). */
  offset: z.coerce.number().int().optional(),
  length: z.coerce.number().int().min(0).optional(),
});

/** The REST gateway's exec (clients before 0.5 run every command through it). */
export const PrimeExecRequest = z.strictObject({
  command: z.string().min(1),
  working_dir: z.string().min(1).nullable().optional(),
  env: z.record(z.string(), z.string()).default({}),
  sandbox_id: z.string().optional(),
  /** Seconds; past it the answer is 408 (the client's CommandTimeoutError). */
  timeout: z
    .number()
    .int()
    .positive()
    .max(7 * 24 * 3600)
    .optional(),
  user: z.string().min(1).optional(),
});
