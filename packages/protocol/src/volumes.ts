import { z } from "zod";

// Volumes: directories on a host that outlive sandboxes, shared by the sandboxes that mount them
// (issue #36). A volume is a team's resource like a sandbox: another team's answers as missing.

// MOVING: on its way to another host of a fleet through the object store (no sandbox mounts it meanwhile).
export const VOLUME_STATES = ["CREATING", "READY", "MOVING", "DELETING", "DELETED"] as const;
export const VolumeState = z.enum(VOLUME_STATES);
export type VolumeState = z.infer<typeof VolumeState>;

export const VolumeName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "volume names are 1-63 letters, digits, '.', '_', '-'");

/** A volume's id (`vol-` and 16 hex digits) or its name: every volume route and mount takes either. */
export const VolumeRef = z.string().min(1).max(64);

const labelKey = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/, "label keys are 1-63 letters, digits, '.', '_', '-', '/'");

/** The largest size_gb a volume may ask for (a team's max_volume_gb bounds the sum). */
export const MAX_VOLUME_GB = 16_384;

export const CreateVolumeRequest = z.strictObject({
  name: VolumeName,
  /** The most its files may hold, in GiB: a write past it is refused (VOLUME_FULL). */
  size_gb: z.number().int().min(1).max(MAX_VOLUME_GB).default(10),
  labels: z.record(labelKey, z.string().max(256)).default({}),
});
export type CreateVolumeRequest = z.input<typeof CreateVolumeRequest>;

export const Volume = z.object({
  id: z.string(),
  name: z.string(),
  team_id: z.string(),
  status: VolumeState,
  size_gb: z.number().int(),
  labels: z.record(z.string(), z.string()),
  /** Bytes its files take (allocated blocks), as last measured (at its last read or write through the API). */
  used_bytes: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
  /** Sandboxes (not ended) that mount it; a volume is deleted only when none does. */
  mounted_by: z.array(z.string()).default([]),
  /**
   * Fleet with an object store, a volume whose home is a worker: when its last copy in the bucket
   * was taken (null: never). A lost worker's volume comes back as of this time (docs/fleet.md).
   */
  synced_at: z.string().nullable().optional(),
  /** The size in bytes of that copy (an archive of its files). */
  synced_bytes: z.number().nullable().optional(),
  /**
   * Its home host was lost at this time and it has not been brought back yet: the next create that
   * mounts it (or its file API) restores it from the copy of `synced_at`, or is 410 VOLUME_LOST without one.
   */
  home_lost_at: z.string().nullable().optional(),
  /** It was brought back from the bucket after its host was lost: its files are as of this time (writes after it were lost). */
  restored_as_of: z.string().nullable().optional(),
});
export type Volume = z.infer<typeof Volume>;

export const VolumeList = z.object({ volumes: z.array(Volume) });
export type VolumeList = z.infer<typeof VolumeList>;

/** Guest paths a volume may not be mounted at (the guest's own kernel filesystems). */
const RESERVED_MOUNT_ROOTS = ["/proc", "/sys", "/dev"];

export const VolumeMountPath = z
  .string()
  .min(2)
  .max(4096)
  .refine((p) => !p.includes("\0"), "must not contain NUL")
  .refine((p) => p.startsWith("/"), "must be absolute")
  .refine((p) => !p.split("/").some((c) => c === ".." || c === "."), "must not contain '.' or '..' components")
  .transform((p) => p.replace(/\/+/g, "/").replace(/\/$/, ""))
  .refine((p) => p !== "" && p !== "/", "cannot be /")
  .refine((p) => !RESERVED_MOUNT_ROOTS.some((r) => p === r || p.startsWith(`${r}/`)), "cannot be under /proc, /sys or /dev");

/** One volume of a sandbox create: mounted at `path` in the guest. */
export const VolumeMount = z.strictObject({
  volume: VolumeRef,
  path: VolumeMountPath,
  read_only: z.boolean().default(false),
});
export type VolumeMount = z.input<typeof VolumeMount>;

export const VolumeMounts = z
  .array(VolumeMount)
  .max(16)
  .refine((ms) => new Set(ms.map((m) => m.path)).size === ms.length, "two volumes mounted at the same path")
  .refine((ms) => new Set(ms.map((m) => m.volume)).size === ms.length, "the same volume named twice");

/**
 * What a restore or a fork mounts of its source sandbox's volumes: `shared` (the default) the
 * same volumes; `snapshot` a copy-on-write snapshot of each, made a new volume of the team
 * (named `<name>-snap-<6 hex>`), so the child's writes never reach the source's volume.
 */
export const VolumeSourceMode = z.enum(["shared", "snapshot"]);
export type VolumeSourceMode = z.infer<typeof VolumeSourceMode>;

/** A create's `volumes`: mounts by name, or (with checkpoint_id) what to do with the source's. */
export const CreateVolumes = z.union([VolumeMounts, VolumeSourceMode]);

/** A volume as a sandbox mounts it (the Sandbox answer's `volumes`). */
export const SandboxVolume = z.object({
  volume_id: z.string(),
  name: z.string(),
  path: z.string(),
  read_only: z.boolean(),
});
export type SandboxVolume = z.infer<typeof SandboxVolume>;

// A fleet's control plane moves an idle volume between hosts through the object store: the host
// that holds it packs it (one archive, its volumes port's archives), the host it goes to unpacks it,
// the old host drops its copy (docs/volumes.md, "Fleets").

export const PackedVolume = z.object({
  key: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  size: z.number().int().nonnegative(),
});
export type PackedVolume = z.infer<typeof PackedVolume>;
