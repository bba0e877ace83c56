import { z } from "zod";
import { HostName } from "./host-name.js";
import { VolumeSourceMode } from "./volumes.js";

export const CHECKPOINT_STATES = ["PENDING", "FROZEN", "DURABLE", "FAILED", "DELETING"] as const;
export const CheckpointState = z.enum(CHECKPOINT_STATES);
export type CheckpointState = z.infer<typeof CheckpointState>;

export const Checkpoint = z.object({
  id: z.string(),
  sandbox_id: z.string(),
  parent_id: z.string().nullable(),
  team_id: z.string(),
  state: CheckpointState,
  depth: z.number().int(),
  image: z.string(),
  disk_size_bytes: z.number(),
  stored_bytes: z.number(),
  error: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  expires_at: z.string().nullable(),
  /** Carries RAM and device state too: restores resume with processes running. */
  has_memory: z.boolean(),
  /**
   * The machine a memory checkpoint's state loads into: the accelerator (under KVM with the guest
   * CPU), with `+nested` when the guest had hardware virtualization (`tcg`, `tcg+nested`,
   * `kvm:EPYC-Milan`, `kvm:host/GenuineIntel-6-143-8-...+nested`); null without memory. A memory
   * restore, fork or reset needs the same. Optional: older servers omit it.
   */
  machine: z.string().nullable().optional(),
  /** Metered storage cost so far in USD, the upload charge included (unrounded). Optional: older servers omit it. */
  cost_usd: z.number().optional(),
});
export type Checkpoint = z.infer<typeof Checkpoint>;

export const CreateCheckpointRequest = z.strictObject({
  /** Save memory and device state too (the sandbox pauses for the save). */
  include_memory: z.boolean().default(false),
  /** Deleted automatically this long after creation. */
  ttl_seconds: z
    .number()
    .int()
    .min(1)
    .max(365 * 24 * 3600)
    .optional(),
});
export type CreateCheckpointRequest = z.input<typeof CreateCheckpointRequest>;

export const CheckpointList = z.object({ checkpoints: z.array(Checkpoint) });
export type CheckpointList = z.infer<typeof CheckpointList>;

export const ForkRequest = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "names are 1-63 letters, digits, '.', '_', '-'")
    .optional(),
  cpu_cores: z.number().int().min(1).max(64).optional(),
  memory_gb: z.number().min(0.125).max(256).optional(),
  timeout_minutes: z.number().optional(),
  /** Fork with memory: children resume with the parent's processes running. */
  memory: z.boolean().default(false),
  /** Start this many children from one checkpoint; the answer is then `{sandboxes, checkpoint_id}`. */
  count: z.number().int().min(1).max(64).optional(),
  /** How long children placed on another host wait for the checkpoint to become DURABLE (here they start once it is FROZEN). */
  wait_timeout_seconds: z.number().positive().max(3600).default(300),
  /** Start the children on this fleet host (admin keys only): refused, never moved, when it cannot take them. */
  host: HostName.optional(),
  /** The parent's volumes: `shared` (default) the same ones; `snapshot` a copy-on-write snapshot of each (not with memory). */
  volumes: VolumeSourceMode.default("shared"),
});
export type ForkRequest = z.input<typeof ForkRequest>;

export const ResetRequest = z.strictObject({ checkpoint_id: z.string().min(1).max(64) });
export type ResetRequest = z.input<typeof ResetRequest>;
