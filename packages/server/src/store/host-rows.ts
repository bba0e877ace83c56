import type { HostState } from "@sandtree/protocol";
import type { HostRow } from "./host-store.js";

/**
 * A `hosts` row as the database driver returns it, the same columns on both backends (see
 * sqlite-hosts.ts and pg-hosts.ts). `C` is how the backend stores `cordoned`: PostgreSQL a
 * boolean, SQLite 0 or 1.
 */
export interface HostTableRow<C> {
  id: string;
  name: string;
  state: HostState;
  cordoned: C;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  accel: "kvm" | "tcg";
  images: string;
  templates: string;
  layers: string;
  used_vcpus: number;
  used_memory_mib: number;
  used_disk_gib: number;
  placements: number;
  registered_at: string;
  last_heartbeat_at: string;
  secret_hash: string;
}

/** The HostRow a table row holds; `cordoned` reads the backend's stored flag. */
export function hostFromRow<C>(r: HostTableRow<C>, cordoned: (stored: C) => boolean): HostRow {
  return {
    id: r.id,
    name: r.name,
    state: r.state,
    cordoned: cordoned(r.cordoned),
    capacity: { vcpus: r.vcpus, memory_mib: r.memory_mib, disk_gib: r.disk_gib, accel: r.accel },
    locality: { images: JSON.parse(r.images), templates: JSON.parse(r.templates), layers: JSON.parse(r.layers) },
    usage: { vcpus: r.used_vcpus, memory_mib: r.used_memory_mib, disk_gib: r.used_disk_gib, placements: r.placements },
    registered_at: r.registered_at,
    last_heartbeat_at: r.last_heartbeat_at,
    secret_hash: r.secret_hash,
  };
}
