import type pg from "pg";
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
import { all, one, run, tx } from "./pg-db.js";

/**
 * The fleet's tables on PostgreSQL (migration `0004-fleet-hosts`), the same columns and meanings as
 * SQLite's (sqlite-hosts.ts). Times are ISO-8601 text compared bytewise (COLLATE "C").
 */
export const PG_HOSTS_MIGRATION = `
  CREATE TABLE hosts (id TEXT PRIMARY KEY, name TEXT COLLATE "C" NOT NULL UNIQUE, state TEXT NOT NULL,
    cordoned BOOLEAN NOT NULL DEFAULT false, vcpus INTEGER NOT NULL, memory_mib BIGINT NOT NULL,
    disk_gib BIGINT NOT NULL, accel TEXT NOT NULL, images TEXT NOT NULL, templates TEXT NOT NULL,
    layers TEXT NOT NULL, used_vcpus INTEGER NOT NULL DEFAULT 0, used_memory_mib BIGINT NOT NULL DEFAULT 0,
    used_disk_gib BIGINT NOT NULL DEFAULT 0, placements INTEGER NOT NULL DEFAULT 0,
    registered_at TEXT COLLATE "C" NOT NULL, last_heartbeat_at TEXT COLLATE "C" NOT NULL, secret_hash TEXT NOT NULL);
  CREATE TABLE placements (sandbox_id TEXT PRIMARY KEY, host_id TEXT NOT NULL REFERENCES hosts(id),
    vcpus INTEGER NOT NULL, memory_mib BIGINT NOT NULL, disk_gib BIGINT NOT NULL, placed_at TEXT COLLATE "C" NOT NULL);
  CREATE INDEX placements_host ON placements(host_id, placed_at, sandbox_id);`;

/** Who starts each sandbox placed on a host: the placing control plane's own host (strandedStarts). */
export const PG_PLACED_BY_MIGRATION = `
  ALTER TABLE placements ADD COLUMN placed_by TEXT;
  CREATE INDEX placements_placed_by ON placements(placed_by);`;

/** See HostStore.strandedStarts. */
const STRANDED_STARTS = `
  SELECT p.sandbox_id, p.host_id, p.placed_by FROM placements p LEFT JOIN sandboxes s ON s.id = p.sandbox_id
  WHERE p.placed_by IS NOT NULL AND p.host_id <> p.placed_by
    AND (p.placed_by = $1 OR p.placed_by IN (SELECT id FROM hosts WHERE state = 'LOST'))
    AND (s.id IS NULL OR s.status IN ('PENDING', 'PROVISIONING'))
  ORDER BY p.placed_at, p.sandbox_id`;

/** See HostStore.placedByLostPeers. */
const PLACED_BY_LOST_PEERS = `
  SELECT p.sandbox_id, p.host_id, p.placed_by FROM placements p
  WHERE p.placed_by IS NOT NULL AND p.host_id <> p.placed_by AND p.placed_by <> $1
    AND p.placed_by IN (SELECT id FROM hosts WHERE state = 'LOST')
  ORDER BY p.placed_at, p.sandbox_id`;

/** See HostStore.whereabouts. */
const WHEREABOUTS = `
  SELECT s.id AS sandbox_id, s.status, p.host_id FROM sandboxes s LEFT JOIN placements p ON p.sandbox_id = s.id
  WHERE s.id = ANY($1) ORDER BY s.id`;

type Row = HostTableRow<boolean>;

const fromRow = (r: Row): HostRow => hostFromRow(r, (c) => c);

const PLACEMENT_COLUMNS = "sandbox_id, host_id, vcpus, memory_mib, disk_gib, placed_at";

/**
 * The host registry on PostgreSQL, shared by every control plane on the database. `place` is one
 * statement: a CTE whose conditional UPDATE of the host row re-checks state, heartbeat and free
 * capacity under that row's lock, and inserts the placement only when the update matched, so two
 * control planes can never overcommit a host or place one sandbox twice. `markLost` re-checks the
 * heartbeat in its UPDATE, so a beat that lands first wins, and only one control plane sees a
 * host go LOST.
 */
export class PgHostStore implements HostStore {
  constructor(private readonly pool: pg.Pool) {}

  async registerHost(h: NewHost): Promise<HostRow> {
    const { capacity: c, locality: l } = h;
    const r = await one<Row>(
      this.pool,
      `INSERT INTO hosts (id, name, state, vcpus, memory_mib, disk_gib, accel, images, templates, layers,
           registered_at, last_heartbeat_at, secret_hash)
         VALUES ($1, $2, 'ACTIVE', $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)
         ON CONFLICT (name) DO UPDATE SET vcpus = excluded.vcpus, memory_mib = excluded.memory_mib,
           disk_gib = excluded.disk_gib, accel = excluded.accel, images = excluded.images,
           templates = excluded.templates, layers = excluded.layers, secret_hash = excluded.secret_hash,
           last_heartbeat_at = excluded.last_heartbeat_at,
           state = CASE WHEN hosts.cordoned THEN 'CORDONED' ELSE 'ACTIVE' END
         RETURNING *`,
      [
        h.id,
        h.name,
        c.vcpus,
        c.memory_mib,
        c.disk_gib,
        c.accel,
        JSON.stringify(l.images),
        JSON.stringify(l.templates),
        JSON.stringify(l.layers),
        h.at,
        h.secret_hash,
      ],
    );
    return fromRow(r as Row);
  }

  async getHost(id: string): Promise<HostRow | undefined> {
    const r = await one<Row>(this.pool, "SELECT * FROM hosts WHERE id = $1", [id]);
    return r ? fromRow(r) : undefined;
  }

  async getHostByName(name: string): Promise<HostRow | undefined> {
    const r = await one<Row>(this.pool, "SELECT * FROM hosts WHERE name = $1", [name]);
    return r ? fromRow(r) : undefined;
  }

  async listHosts(): Promise<HostRow[]> {
    return (await all<Row>(this.pool, "SELECT * FROM hosts ORDER BY name")).map(fromRow);
  }

  async heartbeat(
    id: string,
    beat: { at: string; capacity?: HostRow["capacity"]; locality?: HostRow["locality"] },
  ): Promise<HostRow | undefined> {
    const params: unknown[] = [id, beat.at];
    const sets = [
      "last_heartbeat_at = $2",
      "state = CASE WHEN state = 'LOST' THEN (CASE WHEN cordoned THEN 'CORDONED' ELSE 'ACTIVE' END) ELSE state END",
    ];
    const add = (col: string, v: unknown) => {
      params.push(v);
      sets.push(`${col} = $${params.length}`);
    };
    if (beat.capacity) {
      add("vcpus", beat.capacity.vcpus);
      add("memory_mib", beat.capacity.memory_mib);
      add("disk_gib", beat.capacity.disk_gib);
      add("accel", beat.capacity.accel);
    }
    if (beat.locality) {
      add("images", JSON.stringify(beat.locality.images));
      add("templates", JSON.stringify(beat.locality.templates));
      add("layers", JSON.stringify(beat.locality.layers));
    }
    const r = await one<Row>(this.pool, `UPDATE hosts SET ${sets.join(", ")} WHERE id = $1 RETURNING *`, params);
    return r ? fromRow(r) : undefined;
  }

  async setCordoned(id: string, cordoned: boolean): Promise<HostRow | undefined> {
    const r = await one<Row>(
      this.pool,
      `UPDATE hosts SET cordoned = $2,
           state = CASE WHEN state = 'LOST' THEN 'LOST' WHEN $2 THEN 'CORDONED' ELSE 'ACTIVE' END
         WHERE id = $1 RETURNING *`,
      [id, cordoned],
    );
    return r ? fromRow(r) : undefined;
  }

  async markLost(staleBefore: string): Promise<LostHost[]> {
    // One conditional UPDATE per stale host, each in its own transaction with its placement read, so
    // a heartbeat that commits first wins and two reapers never both report one host.
    const stale = await all<{ id: string }>(
      this.pool,
      "SELECT id FROM hosts WHERE state <> 'LOST' AND last_heartbeat_at < $1 ORDER BY name",
      [staleBefore],
    );
    const lost: LostHost[] = [];
    for (const { id } of stale) {
      const found = await tx(this.pool, async (c) => {
        const r = await one<Row>(
          c,
          "UPDATE hosts SET state = 'LOST' WHERE id = $1 AND state <> 'LOST' AND last_heartbeat_at < $2 RETURNING *",
          [id, staleBefore],
        );
        if (!r) return undefined;
        const placed = await all<{ sandbox_id: string }>(
          c,
          "SELECT sandbox_id FROM placements WHERE host_id = $1 ORDER BY placed_at, sandbox_id",
          [id],
        );
        return { host: fromRow(r), sandboxIds: placed.map((p) => p.sandbox_id) };
      });
      if (found) lost.push(found);
    }
    return lost;
  }

  async place(p: PlacementRow, opts: PlaceOptions): Promise<boolean> {
    // One round trip: the claim's row lock orders concurrent placements on one host; the insert runs
    // only when the claim matched, and a sandbox already placed makes the whole statement fail on
    // the primary key (rolled back with its claim) and answers false.
    try {
      const n = await run(
        this.pool,
        `WITH claim AS (
           UPDATE hosts SET used_vcpus = used_vcpus + $3, used_memory_mib = used_memory_mib + $4,
             used_disk_gib = used_disk_gib + $5, placements = placements + 1
           WHERE id = $2 AND ($7 OR (state = 'ACTIVE' AND last_heartbeat_at >= $8
             AND used_vcpus + $3 <= vcpus AND used_memory_mib + $4 <= memory_mib AND used_disk_gib + $5 <= disk_gib))
           RETURNING id)
         INSERT INTO placements (${PLACEMENT_COLUMNS}, placed_by)
           SELECT $1, id, $3, $4, $5, $6, $9 FROM claim`,
        [
          p.sandbox_id,
          p.host_id,
          p.vcpus,
          p.memory_mib,
          p.disk_gib,
          p.placed_at,
          opts.force === true,
          opts.freshSince,
          opts.placedBy ?? null,
        ],
      );
      return n === 1;
    } catch (err) {
      if ((err as { code?: string }).code === "23505") return false; // unique_violation: placed already
      throw err;
    }
  }

  async release(sandboxId: string): Promise<boolean> {
    const n = await run(
      this.pool,
      `WITH gone AS (DELETE FROM placements WHERE sandbox_id = $1 RETURNING *)
       UPDATE hosts h SET used_vcpus = h.used_vcpus - g.vcpus, used_memory_mib = h.used_memory_mib - g.memory_mib,
         used_disk_gib = h.used_disk_gib - g.disk_gib, placements = h.placements - 1
       FROM gone g WHERE h.id = g.host_id`,
      [sandboxId],
    );
    return n > 0;
  }

  async getPlacement(sandboxId: string): Promise<PlacementRow | undefined> {
    return one<PlacementRow>(this.pool, `SELECT ${PLACEMENT_COLUMNS} FROM placements WHERE sandbox_id = $1`, [sandboxId]);
  }

  async listPlacements(hostId: string): Promise<Array<PlacementRow & { placed_by: string | null }>> {
    return all<PlacementRow & { placed_by: string | null }>(
      this.pool,
      `SELECT ${PLACEMENT_COLUMNS}, placed_by FROM placements WHERE host_id = $1 ORDER BY placed_at, sandbox_id`,
      [hostId],
    );
  }

  async countPlacements(): Promise<number> {
    return ((await one<{ n: number }>(this.pool, "SELECT COUNT(*) AS n FROM placements")) as { n: number }).n;
  }

  async whereabouts(ids: readonly string[]): Promise<SandboxWhereabouts[]> {
    return ids.length ? all<SandboxWhereabouts>(this.pool, WHEREABOUTS, [ids]) : [];
  }

  strandedStarts(ownHostId: string): Promise<StrandedStart[]> {
    return all<StrandedStart>(this.pool, STRANDED_STARTS, [ownHostId]);
  }

  placedByLostPeers(ownHostId: string): Promise<StrandedStart[]> {
    return all<StrandedStart>(this.pool, PLACED_BY_LOST_PEERS, [ownHostId]);
  }

  async takeOverPlacement(sandboxId: string, from: string, to: string): Promise<boolean> {
    const n = await run(this.pool, "UPDATE placements SET placed_by = $1 WHERE sandbox_id = $2 AND placed_by = $3", [
      to,
      sandboxId,
      from,
    ]);
    return n > 0;
  }
}
