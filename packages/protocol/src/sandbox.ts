import { z } from "zod";
import { DisplaySize } from "./desktop.js";
import { HostName } from "./host-name.js";
import { NetworkRuleList, Tunnels } from "./network.js";
import { CreateVolumes, SandboxVolume } from "./volumes.js";

export const SANDBOX_STATUSES = ["PENDING", "PROVISIONING", "RUNNING", "PAUSED", "TERMINATED", "ERROR", "TIMEOUT"] as const;
export const SandboxStatus = z.enum(SANDBOX_STATUSES);
export type SandboxStatus = z.infer<typeof SandboxStatus>;
/** Statuses a sandbox never leaves. */
export const TERMINAL_STATUSES: readonly SandboxStatus[] = ["TERMINATED", "ERROR", "TIMEOUT"];

/**
 * Why a sandbox ended in ERROR, as a stable code (`error_reason` says it in a sentence):
 * START_FAILED (it never got to RUNNING), GUEST_RESET (its guest rebooted, panicked or powered
 * off: a sandbox's machine does not reboot), MACHINE_EXITED (its machine ended otherwise: killed,
 * crashed), MACHINE_UNRESPONSIVE (its guest stopped answering or broke the agent protocol, or a
 * failed checkpoint left it untrustworthy: the machine was killed), HOST_LOST (its host stopped
 * heartbeating), RESTART_LOST (the server restarted while it started, or its machine was gone or
 * could not be adopted after the restart), RESET_FAILED (an episode reset could not start its new
 * machine).
 */
export const SANDBOX_ERROR_CODES = [
  "START_FAILED",
  "GUEST_RESET",
  "MACHINE_EXITED",
  "MACHINE_UNRESPONSIVE",
  "HOST_LOST",
  "RESTART_LOST",
  "RESET_FAILED",
] as const;
export const SandboxErrorCode = z.enum(SANDBOX_ERROR_CODES);
export type SandboxErrorCode = z.infer<typeof SandboxErrorCode>;

const labelKey = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/, "label keys are 1-63 letters, digits, '.', '_', '-', '/'");
const envKey = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "environment variable names are letters, digits and '_'");
const envValue = z
  .string()
  .max(32_768)
  .refine((v) => !v.includes("\0"), "must not contain NUL");

export const RegistryCredentials = z.strictObject({
  username: z.string().min(1).max(256),
  password: z.string().min(1).max(4096),
});
export type RegistryCredentials = z.infer<typeof RegistryCredentials>;

export const CreateSandboxRequest = z.strictObject({
  image: z.string().min(1).max(512),
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "names are 1-63 letters, digits, '.', '_', '-'")
    .optional(),
  cpu_cores: z.number().int().min(1).max(64).default(1),
  memory_gb: z.number().min(0.125).max(256).default(0.5),
  disk_size_gb: z.number().int().min(1).max(2048).default(4),
  environment_vars: z.record(envKey, envValue).default({}),
  labels: z.record(labelKey, z.string().max(256)).default({}),
  start_command: z.string().min(1).max(65_536).optional(),
  registry_credentials: RegistryCredentials.optional(),
  /** Lifetime from creation; negative means no limit; 0 is invalid. Fractions allowed (0.05 = 3 s). */
  timeout_minutes: z
    .number()
    .max(7 * 24 * 60)
    .refine((v) => v !== 0, "0 is not a timeout: use a negative number for no limit")
    .default(60),
  /** Ends the sandbox after this long without commands, transfers or file reads (min 0.05 = 3 s, for tests). */
  idle_timeout_minutes: z.number().min(0.05).max(1440).optional(),
  /** Encrypted at rest, injected into every exec and the start command, shown as "***". */
  secrets: z
    .record(envKey, envValue)
    .refine((r) => Object.keys(r).length <= 64, "at most 64 secrets")
    .optional(),
  /** The same key (per team, for 24 hours) returns the sandbox it created instead of a new one. */
  idempotency_key: z.string().min(1).max(128).optional(),
  /** Restore from this checkpoint: the image and disk size come from it. */
  checkpoint_id: z.string().min(1).max(64).optional(),
  /** With a memory checkpoint: resume with its processes running (409 if it has no memory). */
  restore_memory: z.boolean().default(false),
  /** false: no network interface at all. */
  network: z.boolean().default(true),
  /** Run it on this fleet host (admin keys only): refused, never moved, when that host cannot take it. */
  host: HostName.optional(),
  /** Only these destinations (and tunnels) are reachable; exclusive with network_denylist. */
  network_allowlist: NetworkRuleList.optional(),
  /** Everything but these destinations is reachable. */
  network_denylist: NetworkRuleList.optional(),
  /** NAME -> HOST:PORT: the host's service at NAME.sandtree.internal:PORT, even under deny-all. */
  tunnels: Tunnels.optional(),
  /** A desktop (image sandtree/desktop): the display brought up once the sandbox runs; absent: no display. */
  display: DisplaySize.optional(),
  /**
   * Hardware virtualization inside the sandbox: the guest gets `/dev/kvm` (VMs, Firecracker,
   * emulators, a sandtree of its own). Off by default: the guest CPU then hides SVM and VMX.
   */
  nested_virtualization: z.boolean().default(false),
  /**
   * Volumes mounted in the guest (by id or name, each at its own absolute path). With
   * checkpoint_id: `"shared"` (the default) mounts the source sandbox's volumes, `"snapshot"` a
   * copy-on-write snapshot of each (new volumes of the team).
   */
  volumes: CreateVolumes.optional(),
});
export type CreateSandboxRequest = z.input<typeof CreateSandboxRequest>;
export type CreateSandboxParams = z.output<typeof CreateSandboxRequest>;

export const Sandbox = z.object({
  id: z.string(),
  name: z.string().nullable(),
  team_id: z.string(),
  image: z.string(),
  image_digest: z.string().nullable(),
  status: SandboxStatus,
  cpu_cores: z.number().int(),
  memory_gb: z.number(),
  disk_size_gb: z.number().int(),
  environment_vars: z.record(z.string(), z.string()),
  labels: z.record(z.string(), z.string()),
  start_command: z.string().nullable(),
  /**
   * The desktop's display size (`1280x800`) when it has one: asked on create, or the image's
   * default (label `sandtree.display`); null without. Optional: older servers omit it.
   */
  display: z.string().nullable().optional(),
  /** Whether the guest has hardware virtualization (`/dev/kvm`). Optional: older servers omit it. */
  nested_virtualization: z.boolean().optional(),
  /** Secret names, each value masked as "***". */
  secrets: z.record(z.string(), z.string()).optional(),
  accel: z.string().nullable(),
  error_reason: z.string().nullable(),
  /** Why it ended in ERROR (null otherwise). Optional: older servers omit it. */
  error_code: SandboxErrorCode.nullable().optional(),
  created_at: z.string(),
  updated_at: z.string(),
  started_at: z.string().nullable(),
  terminated_at: z.string().nullable(),
  /** Lifetime limit (null: none); optional so older servers and other producers still parse. */
  timeout_minutes: z.number().nullable().optional(),
  idle_timeout_minutes: z.number().nullable().optional(),
  /** When the sandbox moves to TIMEOUT (null: no lifetime limit). */
  expires_at: z.string().nullable().optional(),
  /** Last command, transfer or file read (status reads do not count). */
  last_activity_at: z.string().nullable().optional(),
  /** How it started: "warm" (a clone of a saved template VM) or "cold" (a full boot). */
  start_path: z.enum(["warm", "cold", "memory"]).nullable().optional(),
  /** Metered cost so far in USD (unrounded; see GET /v1/usage). Optional: older servers omit it. */
  cost_usd: z.number().optional(),
  /** The checkpoint this sandbox was restored or forked from. */
  source_checkpoint_id: z.string().nullable().optional(),
  /** The newest checkpoint in this sandbox's chain (the parent of its next checkpoint). */
  head_checkpoint_id: z.string().nullable().optional(),
  /**
   * The fleet host that runs it (`local`: the server's own), shown to admin keys only; null once
   * it ended (its placement is given back). Absent for other keys and from older servers.
   */
  host: z.string().nullable().optional(),
  /** The volumes it mounts (none: empty). Optional: older servers omit it. */
  volumes: z.array(SandboxVolume).optional(),
});
export type Sandbox = z.infer<typeof Sandbox>;

export const ListSandboxesQuery = z.strictObject({
  status: SandboxStatus.optional(),
  label: z.union([z.string(), z.array(z.string())]).optional(),
  /** Only sandboxes running on this fleet host (admin keys only). */
  host: HostName.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(200).optional(),
});
export type ListSandboxesQuery = z.input<typeof ListSandboxesQuery>;

export const SandboxList = z.object({
  sandboxes: z.array(Sandbox),
  next_cursor: z.string().nullable(),
});
export type SandboxList = z.infer<typeof SandboxList>;

export const SandboxLogs = z.object({
  sandbox_id: z.string(),
  console: z.string(),
  console_truncated: z.boolean(),
  events: z.array(z.object({ at: z.string(), message: z.string() })),
});
export type SandboxLogs = z.infer<typeof SandboxLogs>;
