import type Database from "better-sqlite3";
import { type HostTableRow, hostFromRow } from "./host-rows.js";
import type {
  HostRow,
  HostStore,
  LostHost,
  NewHost,
  PlacementRow,
  PlaceOptions,
  SandboxWhereabouts,
  StrandedStart,
} from "./host-store.js";

/**
 * The fleet's tables, in SqliteStore's migration sequence (same database file and connection).
 * A host's usage lives on its row, changed in the transaction that records or releases a
 * placement, so placing is one conditional UPDATE that re-checks the free capacity.
 */
export const HOSTS_MIGRATION = `
  CREATE TABLE hosts (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
    cordoned INTEGER NOT NULL DEFAULT 0, vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL,
    disk_gib INTEGER NOT NULL, accel TEXT NOT NULL, images TEXT NOT NULL, templates TEXT NOT NULL,
    layers TEXT NOT NULL, used_vcpus INTEGER NOT NULL DEFAULT 0, used_memory_mib INTEGER NOT NULL DEFAULT 0,
    used_disk_gib INTEGER NOT NULL DEFAULT 0, placements INTEGER NOT NULL DEFAULT 0,
    registered_at TEXT NOT NULL, last_heartbeat_at TEXT NOT NULL, secret_hash TEXT NOT NULL);
  CREATE TABLE placements (sandbox_id TEXT PRIMARY KEY, host_id TEXT NOT NULL REFERENCES hosts(id),
    vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, disk_gib INTEGER NOT NULL, placed_at TEXT NOT NULL);
  CREATE INDEX placements_host ON placements(host_id);`;

/** Who starts each sandbox placed on a host: the placing control plane's own host (strandedStarts). */
export const PLACED_BY_MIGRATION = `
  ALTER TABLE placements ADD COLUMN placed_by TEXT;
  CREATE INDEX placements_placed_by ON placements(placed_by);`;

const PLACEMENT_COLUMNS = "sandbox_id, host_id, vcpus, memory_mib, disk_gib, placed_at";

/** See HostStore.strandedStarts. */
const STRANDED_STARTS = `
  SELECT p.sandbox_id, p.host_id, p.placed_by FROM placements p LEFT JOIN sandboxes s ON s.id = p.sandbox_id
  WHERE p.placed_by IS NOT NULL AND p.host_id <> p.placed_by
    AND (p.placed_by = ? OR p.placed_by IN (SELECT id FROM hosts WHERE state = 'LOST'))
    AND (s.id IS NULL OR s.status IN ('PENDING', 'PROVISIONING'))
  ORDER BY p.placed_at, p.sandbox_id`;

/** See HostStore.placedByLostPeers. */
const PLACED_BY_LOST_PEERS = `
  SELECT p.sandbox_id, p.host_id, p.placed_by FROM placements p
  WHERE p.placed_by IS NOT NULL AND p.host_id <> p.placed_by AND p.placed_by <> ?
    AND p.placed_by IN (SELECT id FROM hosts WHERE state = 'LOST')
  ORDER BY p.placed_at, p.sandbox_id`;

/** See HostStore.whereabouts: the ids go as one JSON array (no limit on bound variables). */
const WHEREABOUTS = `
  SELECT s.id AS sandbox_id, s.status, p.host_id FROM sandboxes s LEFT JOIN placements p ON p.sandbox_id = s.id
  WHERE s.id IN (SELECT value FROM json_each(?)) ORDER BY s.id`;

type Row = HostTableRow<number>;

const fromRow = (r: Row): HostRow => hostFromRow(r, (c) => c === 1);

/** Thrown inside a transaction to roll it back. */
class Refused extends Error {}

export class SqliteHostStore implements HostStore {
  /** Prepared once each: placement runs hundreds of times a second. */
  private readonly stmts = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  private q(sql: string): Database.Statement {
    let st = this.stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.stmts.set(sql, st);
    }
    return st;
  }

  async registerHost(h: NewHost): Promise<HostRow> {
    const { capacity: c, locality: l } = h;
    this.q(
      `INSERT INTO hosts (id, name, state, vcpus, memory_mib, disk_gib, accel, images, templates, layers,
           registered_at, last_heartbeat_at, secret_hash)
         VALUES (@id, @name, 'ACTIVE', @vcpus, @memory_mib, @disk_gib, @accel, @images, @templates, @layers, @at, @at, @secret_hash)
         ON CONFLICT (name) DO UPDATE SET vcpus = excluded.vcpus, memory_mib = excluded.memory_mib,
           disk_gib = excluded.disk_gib, accel = excluded.accel, images = excluded.images,
           templates = excluded.templates, layers = excluded.layers, secret_hash = excluded.secret_hash,
           last_heartbeat_at = excluded.last_heartbeat_at,
           state = CASE WHEN hosts.cordoned = 1 THEN 'CORDONED' ELSE 'ACTIVE' END`,
    ).run({
      id: h.id,
      name: h.name,
      ...c,
      images: JSON.stringify(l.images),
      templates: JSON.stringify(l.templates),
      layers: JSON.stringify(l.layers),
      at: h.at,
      secret_hash: h.secret_hash,
    });
    return (await this.getHostByName(h.name)) as HostRow;
  }

  async getHost(id: string): Promise<HostRow | undefined> {
    const r = this.q("SELECT * FROM hosts WHERE id = ?").get(id) as Row | undefined;
    return r ? fromRow(r) : undefined;
  }

  async getHostByName(name: string): Promise<HostRow | undefined> {
    const r = this.q("SELECT * FROM hosts WHERE name = ?").get(name) as Row | undefined;
    return r ? fromRow(r) : undefined;
  }

  async listHosts(): Promise<HostRow[]> {
    return (this.q("SELECT * FROM hosts ORDER BY name").all() as Row[]).map(fromRow);
  }

  async heartbeat(
    id: string,
    beat: { at: string; capacity?: HostRow["capacity"]; locality?: HostRow["locality"] },
  ): Promise<HostRow | undefined> {
    const sets = [
      "last_heartbeat_at = @at",
      "state = CASE WHEN state = 'LOST' THEN (CASE WHEN cordoned = 1 THEN 'CORDONED' ELSE 'ACTIVE' END) ELSE state END",
    ];
    const params: Record<string, unknown> = { id, at: beat.at };
    if (beat.capacity) {
      sets.push("vcpus = @vcpus", "memory_mib = @memory_mib", "disk_gib = @disk_gib", "accel = @accel");
      Object.assign(params, beat.capacity);
    }
    if (beat.locality) {
      sets.push("images = @images", "templates = @templates", "layers = @layers");
      params.images = JSON.stringify(beat.locality.images);
      params.templates = JSON.stringify(beat.locality.templates);
      params.layers = JSON.stringify(beat.locality.layers);
    }
    const r = this.q(`UPDATE hosts SET ${sets.join(", ")} WHERE id = @id RETURNING *`).get(params) as Row | undefined;
    return r ? fromRow(r) : undefined;
  }

  async setCordoned(id: string, cordoned: boolean): Promise<HostRow | undefined> {
    const changed = this.q(
      `UPDATE hosts SET cordoned = @c,
           state = CASE WHEN state = 'LOST' THEN 'LOST' WHEN @c = 1 THEN 'CORDONED' ELSE 'ACTIVE' END
         WHERE id = @id`,
    ).run({ id, c: cordoned ? 1 : 0 }).changes;
    return changed > 0 ? this.getHost(id) : undefined;
  }

  async markLost(staleBefore: string): Promise<LostHost[]> {
    return this.db.transaction(() => {
      const stale = this.q("SELECT * FROM hosts WHERE state != 'LOST' AND last_heartbeat_at < ? ORDER BY name").all(
        staleBefore,
      ) as Row[];
      const mark = this.q("UPDATE hosts SET state = 'LOST' WHERE id = ? AND state != 'LOST' AND last_heartbeat_at < ?");
      const placed = this.q("SELECT sandbox_id FROM placements WHERE host_id = ? ORDER BY placed_at, sandbox_id");
      const lost: LostHost[] = [];
      for (const r of stale) {
        if (mark.run(r.id, staleBefore).changes === 0) continue;
        const ids = (placed.all(r.id) as Array<{ sandbox_id: string }>).map((p) => p.sandbox_id);
        lost.push({ host: { ...fromRow(r), state: "LOST" }, sandboxIds: ids });
      }
      return lost;
    })();
  }

  private placeTx: ((p: PlacementRow & { placed_by: string | null }, force: number, fresh: string) => void) | null = null;

  async place(p: PlacementRow, opts: PlaceOptions): Promise<boolean> {
    this.placeTx ??= this.db.transaction((row: PlacementRow & { placed_by: string | null }, force: number, fresh: string) => {
      const claim = this.q(
        `UPDATE hosts SET used_vcpus = used_vcpus + @vcpus, used_memory_mib = used_memory_mib + @memory_mib,
           used_disk_gib = used_disk_gib + @disk_gib, placements = placements + 1
         WHERE id = @host_id AND (@force = 1 OR (state = 'ACTIVE' AND last_heartbeat_at >= @fresh
           AND used_vcpus + @vcpus <= vcpus AND used_memory_mib + @memory_mib <= memory_mib
           AND used_disk_gib + @disk_gib <= disk_gib))`,
      );
      const insert = this.q(
        `INSERT INTO placements (sandbox_id, host_id, vcpus, memory_mib, disk_gib, placed_at, placed_by)
         VALUES (@sandbox_id, @host_id, @vcpus, @memory_mib, @disk_gib, @placed_at, @placed_by)
         ON CONFLICT (sandbox_id) DO NOTHING`,
      );
      if (claim.run({ ...row, force, fresh }).changes === 0) throw new Refused();
      if (insert.run(row).changes === 0) throw new Refused();
    });
    try {
      const row = { ...p, placed_by: opts.placedBy ?? null };
      this.placeTx(row, opts.force ? 1 : 0, opts.freshSince);
      return true;
    } catch (err) {
      if (err instanceof Refused) return false;
      throw err;
    }
  }

  async release(sandboxId: string): Promise<boolean> {
    return this.db.transaction(() => {
      const p = this.q(`DELETE FROM placements WHERE sandbox_id = ? RETURNING ${PLACEMENT_COLUMNS}`).get(sandboxId) as
        | PlacementRow
        | undefined;
      if (!p) return false;
      this.q(
        `UPDATE hosts SET used_vcpus = used_vcpus - @vcpus, used_memory_mib = used_memory_mib - @memory_mib,
             used_disk_gib = used_disk_gib - @disk_gib, placements = placements - 1 WHERE id = @host_id`,
      ).run(p);
      return true;
    })();
  }

  async getPlacement(sandboxId: string): Promise<PlacementRow | undefined> {
    return this.q(`SELECT ${PLACEMENT_COLUMNS} FROM placements WHERE sandbox_id = ?`).get(sandboxId) as PlacementRow | undefined;
  }

  async whereabouts(ids: readonly string[]): Promise<SandboxWhereabouts[]> {
    return ids.length ? (this.q(WHEREABOUTS).all(JSON.stringify(ids)) as SandboxWhereabouts[]) : [];
  }

  async listPlacements(hostId: string): Promise<Array<PlacementRow & { placed_by: string | null }>> {
    return this.q(`SELECT ${PLACEMENT_COLUMNS}, placed_by FROM placements WHERE host_id = ? ORDER BY placed_at, sandbox_id`).all(
      hostId,
    ) as Array<PlacementRow & { placed_by: string | null }>;
  }

  async countPlacements(): Promise<number> {
    return (this.q("SELECT COUNT(*) AS n FROM placements").get() as { n: number }).n;
  }

  async strandedStarts(ownHostId: string): Promise<StrandedStart[]> {
    return this.q(STRANDED_STARTS).all(ownHostId) as StrandedStart[];
  }

  async placedByLostPeers(ownHostId: string): Promise<StrandedStart[]> {
    return this.q(PLACED_BY_LOST_PEERS).all(ownHostId) as StrandedStart[];
  }

  async takeOverPlacement(sandboxId: string, from: string, to: string): Promise<boolean> {
    return (
      this.q("UPDATE placements SET placed_by = ? WHERE sandbox_id = ? AND placed_by = ?").run(to, sandboxId, from).changes > 0
    );
  }
}
