import { type NetworkTableRow, networkFromRow } from "./network-rows.js";
import { all, type Db, one, run } from "./pg-db.js";
import type { ExposedPortRow, NetworkPolicyUpdate, NetworkRow } from "./rows.js";

// The SQL behind PgStore's sandbox-network and exposed-port methods. Slot allocation runs in a
// transaction holding a transaction-scoped advisory lock (pg-store.ts), so servers sharing the
// database hand out each slot once; the partial unique index on slot backs that up.

/** The advisory lock key of slot allocation ("netslots" in ASCII). */
export const SLOT_LOCK = 0x6e6574736c6f7473n;

type Raw = NetworkTableRow<boolean>;

const fromRaw = (r: Raw): NetworkRow => networkFromRow(r, (b) => b);

export async function getNetwork(db: Db, sandboxId: string): Promise<NetworkRow | undefined> {
  const r = await one<Raw>(db, "SELECT * FROM sandbox_networks WHERE sandbox_id = $1", [sandboxId]);
  return r ? fromRaw(r) : undefined;
}

export async function updateNetworkPolicy(db: Db, sandboxId: string, p: NetworkPolicyUpdate): Promise<NetworkRow | undefined> {
  const r = await one<Raw>(
    db,
    `UPDATE sandbox_networks SET mode = $1, allowlist = $2, denylist = $3, updated_at = $4, generation = generation + 1,
       applied = false WHERE sandbox_id = $5 AND enabled RETURNING *`,
    [p.mode, JSON.stringify(p.allowlist), JSON.stringify(p.denylist), p.updated_at, sandboxId],
  );
  return r ? fromRaw(r) : undefined;
}

export async function setNetworkApplied(db: Db, sandboxId: string, generation: number, applied: boolean): Promise<boolean> {
  return (
    (await run(db, "UPDATE sandbox_networks SET applied = $1 WHERE sandbox_id = $2 AND generation = $3", [
      applied,
      sandboxId,
      generation,
    ])) > 0
  );
}

export async function putNetwork(db: Db, row: NetworkRow): Promise<void> {
  await run(
    db,
    `INSERT INTO sandbox_networks (sandbox_id, enabled, slot, mode, allowlist, denylist, tunnels, generation, applied, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (sandbox_id) DO UPDATE SET enabled = excluded.enabled, slot = excluded.slot, mode = excluded.mode,
       allowlist = excluded.allowlist, denylist = excluded.denylist, tunnels = excluded.tunnels,
       generation = excluded.generation, applied = excluded.applied, updated_at = excluded.updated_at`,
    [
      row.sandbox_id,
      row.enabled,
      row.slot,
      row.mode,
      JSON.stringify(row.allowlist),
      JSON.stringify(row.denylist),
      JSON.stringify(row.tunnels),
      row.generation,
      row.applied,
      row.updated_at,
    ],
  );
}

/** Inside the allocation transaction (lock held): the sandbox's slot, or the lowest free one below `slots`. */
export async function allocateSlot(db: Db, sandboxId: string, slots: number): Promise<number | null> {
  const current = await one<{ slot: number | null }>(db, "SELECT slot FROM sandbox_networks WHERE sandbox_id = $1 FOR UPDATE", [
    sandboxId,
  ]);
  if (current?.slot != null) return current.slot;
  const used = (await all<{ slot: number }>(db, "SELECT slot FROM sandbox_networks WHERE slot IS NOT NULL ORDER BY slot")).map(
    (r) => r.slot,
  );
  let slot = 0;
  for (const u of used) {
    if (u !== slot) break;
    slot++;
  }
  if (slot >= slots) return null;
  await run(db, "UPDATE sandbox_networks SET slot = $1 WHERE sandbox_id = $2", [slot, sandboxId]);
  return slot;
}

export async function releaseSlot(db: Db, sandboxId: string): Promise<void> {
  await run(db, "UPDATE sandbox_networks SET slot = NULL, applied = false WHERE sandbox_id = $1", [sandboxId]);
}

/** Networks holding a slot. */
export async function listSlotted(db: Db): Promise<NetworkRow[]> {
  return (await all<Raw>(db, "SELECT * FROM sandbox_networks WHERE slot IS NOT NULL ORDER BY slot")).map(fromRaw);
}

/** Inserts the port, or gives an already exposed one a new token (keeping its created_at). */
export async function upsertExposedPort(db: Db, row: ExposedPortRow): Promise<ExposedPortRow> {
  const r = await one<ExposedPortRow>(
    db,
    `INSERT INTO exposed_ports (sandbox_id, port, token_sha256, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (sandbox_id, port) DO UPDATE SET token_sha256 = excluded.token_sha256 RETURNING *`,
    [row.sandbox_id, row.port, row.token_sha256, row.created_at],
  );
  return r ?? row;
}

export function getExposedPort(db: Db, sandboxId: string, port: number): Promise<ExposedPortRow | undefined> {
  return one<ExposedPortRow>(db, "SELECT * FROM exposed_ports WHERE sandbox_id = $1 AND port = $2", [sandboxId, port]);
}

export function listExposedPorts(db: Db, sandboxId: string): Promise<ExposedPortRow[]> {
  return all<ExposedPortRow>(db, "SELECT * FROM exposed_ports WHERE sandbox_id = $1 ORDER BY port", [sandboxId]);
}

export async function deleteExposedPort(db: Db, sandboxId: string, port: number): Promise<boolean> {
  return (await run(db, "DELETE FROM exposed_ports WHERE sandbox_id = $1 AND port = $2", [sandboxId, port])) > 0;
}

export function deleteExposedPorts(db: Db, sandboxId: string): Promise<number> {
  return run(db, "DELETE FROM exposed_ports WHERE sandbox_id = $1", [sandboxId]);
}
