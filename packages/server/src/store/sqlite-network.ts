import type Database from "better-sqlite3";
import { type NetworkTableRow, networkFromRow } from "./network-rows.js";
import type { NetworkPolicyUpdate, NetworkRow } from "./rows.js";

// The SQL behind SqliteStore's sandbox-network methods.

export const NETWORK_MIGRATION = `
  CREATE TABLE sandbox_networks (sandbox_id TEXT PRIMARY KEY, enabled INTEGER NOT NULL,
    slot INTEGER, mode TEXT NOT NULL, allowlist TEXT NOT NULL, denylist TEXT NOT NULL,
    tunnels TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 1, applied INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL);
  CREATE UNIQUE INDEX sandbox_networks_slot ON sandbox_networks(slot) WHERE slot IS NOT NULL;`;

type Raw = NetworkTableRow<number>;

const fromRaw = (r: Raw): NetworkRow => networkFromRow(r, (b) => b === 1);

export function getNetwork(db: Database.Database, sandboxId: string): NetworkRow | undefined {
  const r = db.prepare("SELECT * FROM sandbox_networks WHERE sandbox_id = ?").get(sandboxId) as Raw | undefined;
  return r ? fromRaw(r) : undefined;
}

export function updateNetworkPolicy(db: Database.Database, sandboxId: string, p: NetworkPolicyUpdate): NetworkRow | undefined {
  const r = db
    .prepare(
      `UPDATE sandbox_networks SET mode = ?, allowlist = ?, denylist = ?, updated_at = ?, generation = generation + 1,
         applied = 0 WHERE sandbox_id = ? AND enabled = 1 RETURNING *`,
    )
    .get(p.mode, JSON.stringify(p.allowlist), JSON.stringify(p.denylist), p.updated_at, sandboxId) as Raw | undefined;
  return r ? fromRaw(r) : undefined;
}

export function setNetworkApplied(db: Database.Database, sandboxId: string, generation: number, applied: boolean): boolean {
  return (
    db
      .prepare("UPDATE sandbox_networks SET applied = ? WHERE sandbox_id = ? AND generation = ?")
      .run(applied ? 1 : 0, sandboxId, generation).changes > 0
  );
}

export function putNetwork(db: Database.Database, row: NetworkRow): void {
  db.prepare(
    `INSERT INTO sandbox_networks (sandbox_id, enabled, slot, mode, allowlist, denylist, tunnels, generation, applied, updated_at)
     VALUES (@sandbox_id, @enabled, @slot, @mode, @allowlist, @denylist, @tunnels, @generation, @applied, @updated_at)
     ON CONFLICT (sandbox_id) DO UPDATE SET enabled = excluded.enabled, slot = excluded.slot, mode = excluded.mode,
       allowlist = excluded.allowlist, denylist = excluded.denylist, tunnels = excluded.tunnels,
       generation = excluded.generation, applied = excluded.applied, updated_at = excluded.updated_at`,
  ).run({
    ...row,
    enabled: row.enabled ? 1 : 0,
    applied: row.applied ? 1 : 0,
    allowlist: JSON.stringify(row.allowlist),
    denylist: JSON.stringify(row.denylist),
    tunnels: JSON.stringify(row.tunnels),
  });
}

/** Gives the sandbox the lowest free slot below `slots` (atomic); null when the pool is full. */
export function allocateSlot(db: Database.Database, sandboxId: string, slots: number): number | null {
  return db.transaction(() => {
    const current = db.prepare("SELECT slot FROM sandbox_networks WHERE sandbox_id = ?").get(sandboxId) as
      | { slot: number | null }
      | undefined;
    if (current?.slot != null) return current.slot;
    const used = (
      db.prepare("SELECT slot FROM sandbox_networks WHERE slot IS NOT NULL ORDER BY slot").all() as Array<{ slot: number }>
    ).map((r) => r.slot);
    let slot = 0;
    for (const u of used) {
      if (u !== slot) break;
      slot++;
    }
    if (slot >= slots) return null;
    db.prepare("UPDATE sandbox_networks SET slot = ? WHERE sandbox_id = ?").run(slot, sandboxId);
    return slot;
  })();
}

export function releaseSlot(db: Database.Database, sandboxId: string): void {
  db.prepare("UPDATE sandbox_networks SET slot = NULL, applied = 0 WHERE sandbox_id = ?").run(sandboxId);
}

/** Networks holding a slot. */
export function listSlotted(db: Database.Database): NetworkRow[] {
  return (db.prepare("SELECT * FROM sandbox_networks WHERE slot IS NOT NULL").all() as Raw[]).map(fromRaw);
}
