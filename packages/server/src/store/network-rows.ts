import type { NetworkRow } from "./rows.js";

/**
 * A `sandbox_networks` row as the database driver returns it, the same columns on both backends
 * (sqlite-network.ts, pg-network.ts): the lists are JSON text, and `B` is how the backend stores
 * a flag (PostgreSQL a boolean, SQLite 0 or 1).
 */
export type NetworkTableRow<B> = Omit<NetworkRow, "enabled" | "applied" | "allowlist" | "denylist" | "tunnels"> & {
  enabled: B;
  applied: B;
  allowlist: string;
  denylist: string;
  tunnels: string;
};

/** The NetworkRow a table row holds; `flag` reads the backend's stored `enabled` and `applied`. */
export function networkFromRow<B>(r: NetworkTableRow<B>, flag: (stored: B) => boolean): NetworkRow {
  return {
    ...r,
    enabled: flag(r.enabled),
    applied: flag(r.applied),
    allowlist: JSON.parse(r.allowlist) as string[],
    denylist: JSON.parse(r.denylist) as string[],
    tunnels: JSON.parse(r.tunnels) as Record<string, string>,
  };
}
