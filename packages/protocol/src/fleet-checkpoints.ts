import { z } from "zod";
import { CheckpointState } from "./checkpoint.js";

// What a control plane and its workers exchange about checkpoints taken on workers: the record of
// one layer of a chain, with what a host that never saw it needs to restore it (the blob key and
// sha256 of its layer and memory file, the image digest and the VM shape). Never a host's paths.

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, "a sha256 in hex");
const BlobKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/, "a blob key");

export const CheckpointRecord = z.object({
  id: z.string().min(1).max(64),
  sandbox_id: z.string().min(1).max(64),
  parent_id: z.string().min(1).max(64).nullable(),
  state: CheckpointState,
  depth: z.number().int().min(1),
  image: z.string().min(1).max(512),
  image_digest: z.string().max(128).nullable(),
  disk_size_bytes: z.number().int().nonnegative(),
  stored_bytes: z.number().int().nonnegative(),
  sha256: Sha256.nullable(),
  blob_key: BlobKey.nullable(),
  mem_key: BlobKey.nullable(),
  mem_sha256: Sha256.nullable(),
  cpu_cores: z.number().int().nullable(),
  memory_mb: z.number().int().nullable(),
  error: z.string().max(4096).nullable(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
});
export type CheckpointRecord = z.infer<typeof CheckpointRecord>;

/**
 * `POST /v1/fleet/checkpoints/prepare` (on a worker, control plane only): records the chain's
 * checkpoints it has not seen (top first, every one DURABLE) and fetches and verifies their layers
 * (and, with `memory`, the top's memory file) from the object store, before a restore, fork or reset.
 */
export const PrepareCheckpointRequest = z.strictObject({
  checkpoints: z.array(CheckpointRecord).min(1).max(1000),
  memory: z.boolean().default(false),
});
export type PrepareCheckpointRequest = z.input<typeof PrepareCheckpointRequest>;

export const PrepareCheckpointResponse = z.object({ checkpoint_id: z.string(), layers: z.number().int() });
export type PrepareCheckpointResponse = z.infer<typeof PrepareCheckpointResponse>;
