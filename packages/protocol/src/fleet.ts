import { z } from "zod";
import { Accel } from "./accel.js";
import { HostName } from "./host-name.js";

// Fleet mode: worker hosts join a control plane with a join token, report capacity and
// locality, heartbeat; admins list, cordon and drain hosts; the control plane places work.

export { HostName };

/** ACTIVE takes work; CORDONED takes none (its sandboxes stay); LOST stopped heartbeating. */
export const HOST_STATES = ["ACTIVE", "CORDONED", "LOST"] as const;
export const HostState = z.enum(HOST_STATES);
export type HostState = z.infer<typeof HostState>;

/** A size asked for or offered: at least 1 vCPU and 1 MiB, disk from 0, each up to its bound. */
function sizeFields(max: { vcpus: number; memoryMib: number; diskGib: number }) {
  return {
    vcpus: z.number().int().min(1).max(max.vcpus),
    memory_mib: z.number().int().min(1).max(max.memoryMib),
    disk_gib: z.number().int().min(0).max(max.diskGib),
  };
}

/** A size as answered: what is placed, reserved or in use. */
const SIZE = { vcpus: z.number(), memory_mib: z.number(), disk_gib: z.number() };

/** What a host can run in all: its sandboxes' sum may not exceed it. */
export const HostCapacity = z.strictObject({
  ...sizeFields({ vcpus: 100_000, memoryMib: 1 << 30, diskGib: 1 << 30 }),
  accel: Accel,
});
export type HostCapacity = z.infer<typeof HostCapacity>;

const LocalityKey = z.string().min(1).max(256);
const LocalitySet = z.array(LocalityKey).max(20_000).default([]);

/** What a host already holds: a create, restore or fork lands preferably where its bytes are. */
export const HostLocality = z.strictObject({
  /** Image digests (sha256:...) of the images in its cache. */
  images: LocalitySet,
  /** Warm template keys. */
  templates: LocalitySet,
  /** Checkpoint layer keys. */
  layers: LocalitySet,
});
export type HostLocality = z.infer<typeof HostLocality>;
export type HostLocalityInput = z.input<typeof HostLocality>;

/** `POST /v1/fleet/hosts/register` (Authorization: Bearer <join token>). */
export const RegisterHostRequest = z.strictObject({
  name: HostName,
  capacity: HostCapacity,
  locality: HostLocality.prefault({}),
  /** The worker's sandtree version. */
  version: z.string().max(64).optional(),
  /** The URL the worker advertises (listed as its `url` in `GET /v1/hosts`); `sandtree worker` sends its machine host's, as `host_url`. */
  url: z
    .url({ protocol: /^https?$/ })
    .max(512)
    .optional(),
  /**
   * Where the control plane reaches this worker's machine host (the host interface over Connect-RPC,
   * http://HOST:PORT): the control plane runs the worker's sandboxes through it (absent: an older
   * worker, or a host that runs nothing).
   */
  host_url: z
    .url({ protocol: /^https?$/ })
    .max(512)
    .optional(),
  /**
   * The worker's own blob-store setting (SANDTREE_BLOB_STORE), when it has one: the control plane
   * refuses the join (BLOB_STORE_MISMATCH) unless it is the control plane's own.
   */
  blob_store: z.string().min(1).max(2048).optional(),
});
export type RegisterHostRequest = z.input<typeof RegisterHostRequest>;

/** The per-host secret is shown here only, once; heartbeats send it as their bearer token. */
export const RegisterHostResponse = z.object({
  host_id: z.string(),
  name: z.string(),
  secret: z.string(),
  heartbeat_interval_ms: z.number().int(),
  /**
   * The control plane's object store (an s3:// URL, never credentials: each process takes them from
   * its own AWS environment), which the worker stores its checkpoint layers in; null when the control
   * plane keeps layers in a local directory (checkpoints then stay on the worker that took them).
   */
  blob_store: z.string().nullable().default(null),
});
export type RegisterHostResponse = z.infer<typeof RegisterHostResponse>;

/** `POST /v1/fleet/hosts/{id}/heartbeat` (Authorization: Bearer <host secret>); locality only when it changed. */
export const HeartbeatRequest = z.strictObject({
  capacity: HostCapacity.optional(),
  locality: HostLocality.optional(),
});
export type HeartbeatRequest = z.input<typeof HeartbeatRequest>;

export const HeartbeatResponse = z.object({
  host_id: z.string(),
  state: HostState,
  heartbeat_interval_ms: z.number().int(),
});
export type HeartbeatResponse = z.infer<typeof HeartbeatResponse>;

/** What is placed on a host: the sum of its placements' sizes. */
export const HostUsage = z.object({
  ...SIZE,
  placements: z.number().int(),
});
export type HostUsage = z.infer<typeof HostUsage>;

/** A host as admins see it (never its secret). */
export const Host = z.object({
  id: z.string(),
  name: z.string(),
  state: HostState,
  /** Set by cordon/drain, kept while the host is LOST: it comes back CORDONED. */
  cordoned: z.boolean(),
  capacity: HostCapacity,
  usage: HostUsage,
  /** How many images, templates and layers it holds. */
  locality: z.object({ images: z.number().int(), templates: z.number().int(), layers: z.number().int() }),
  registered_at: z.string(),
  last_heartbeat_at: z.string(),
  /** The URL the worker registered (`url`, else `host_url`; null: the control plane's own host, or a worker that gave none). */
  url: z.string().nullable(),
});
export type Host = z.infer<typeof Host>;

export const HostList = z.object({ hosts: z.array(Host) });
export type HostList = z.infer<typeof HostList>;

/** The answer of cordon, drain and uncordon: the host, and how many sandboxes still run there. */
export const HostStateChange = z.object({ host: Host, remaining_sandboxes: z.number().int() });
export type HostStateChange = z.infer<typeof HostStateChange>;

/**
 * `POST /v1/fleet/placements` (admin): decides a host and records the reservation, starts
 * nothing. Used by the fleet benchmark and by admins checking where work would go.
 */
export const PlacementRequest = z.strictObject({
  sandbox_id: z.string().min(1).max(64),
  ...sizeFields({ vcpus: 1024, memoryMib: 1 << 24, diskGib: 1 << 20 }),
  accel: Accel.optional(),
  image_digest: LocalityKey.optional(),
  template_key: LocalityKey.optional(),
  layers: z.array(LocalityKey).max(1000).default([]),
  /** Pin to this host (admin only): refused, never moved elsewhere, when it cannot take it. */
  host: HostName.optional(),
});
export type PlacementRequest = z.input<typeof PlacementRequest>;

export const Placement = z.object({
  sandbox_id: z.string(),
  host_id: z.string(),
  host: z.string(),
  ...SIZE,
  placed_at: z.string(),
});
export type Placement = z.infer<typeof Placement>;
