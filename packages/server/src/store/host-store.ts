import type { HostCapacity, HostLocality, HostState, HostUsage, SandboxStatus } from "@sandtree/protocol";

/** A host of the fleet as stored. `secret_hash` is the sha256 of its per-host secret. */
export interface HostRow {
  id: string;
  name: string;
  /** ACTIVE or CORDONED as set by admins, LOST when the reaper found it silent. */
  state: HostState;
  /** Kept while LOST, so a cordoned host that comes back stays cordoned. */
  cordoned: boolean;
  capacity: HostCapacity;
  locality: HostLocality;
  usage: HostUsage;
  registered_at: string;
  last_heartbeat_at: string;
  secret_hash: string;
}

export interface PlacementRow {
  sandbox_id: string;
  host_id: string;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  placed_at: string;
}

/** A sandbox placed on `host_id` by the control plane whose own host is `placed_by`. */
export interface StrandedStart {
  sandbox_id: string;
  host_id: string;
  placed_by: string;
}

/** A sandbox's status in this database and the host it is placed on (null: placed nowhere). */
export interface SandboxWhereabouts {
  sandbox_id: string;
  status: SandboxStatus;
  host_id: string | null;
}

export interface PlaceOptions {
  freshSince: string;
  force?: boolean;
  /** The own host (`local`/`local-<id>`) of the control plane that starts the sandbox. */
  placedBy?: string;
}

export interface NewHost {
  id: string;
  name: string;
  capacity: HostCapacity;
  locality: HostLocality;
  secret_hash: string;
  at: string;
}

/** A host the reaper marked LOST and the sandboxes placed on it. */
export interface LostHost {
  host: HostRow;
  sandboxIds: string[];
}

/**
 * The fleet's persistence: hosts and placements. Async throughout so that SQLite and
 * PostgreSQL implement the same seam; each passes test/store/host-conformance.ts.
 *
 * A host's usage is kept on its row and changed in the same transaction as the placements,
 * so `place` is one conditional update (the row lock of the host in PostgreSQL) that re-checks
 * the free capacity: concurrent control planes can never overcommit a host.
 */
export interface HostStore {
  /**
   * Registers a host, or re-registers one of the same name (a worker that restarted): its
   * id, placements and cordon stay; a new secret, capacity and locality replace the old.
   */
  registerHost(h: NewHost): Promise<HostRow>;
  getHost(id: string): Promise<HostRow | undefined>;
  getHostByName(name: string): Promise<HostRow | undefined>;
  /** Ordered by name. */
  listHosts(): Promise<HostRow[]>;
  /**
   * Records a heartbeat at `at`, replacing capacity and locality when given. A LOST host
   * becomes ACTIVE again (CORDONED when it was cordoned). Undefined when the host is unknown.
   */
  heartbeat(id: string, beat: { at: string; capacity?: HostCapacity; locality?: HostLocality }): Promise<HostRow | undefined>;
  /** Cordons or uncordons: state becomes CORDONED/ACTIVE unless the host is LOST. */
  setCordoned(id: string, cordoned: boolean): Promise<HostRow | undefined>;
  /**
   * Marks every ACTIVE or CORDONED host whose last heartbeat is older than `staleBefore`
   * LOST, in one statement per host that re-checks the heartbeat (a beat that arrived in the
   * meantime wins), and answers them with the sandboxes placed on each.
   */
  markLost(staleBefore: string): Promise<LostHost[]>;
  /**
   * Records the placement if the host is ACTIVE, heartbeat no older than `freshSince`, and
   * still has the free vCPUs, memory and disk (or `force`: recorded whatever the state and
   * capacity, for the local host's own sandboxes). False when refused; a sandbox already
   * placed is refused too.
   */
  place(p: PlacementRow, opts: PlaceOptions): Promise<boolean>;
  /** Removes the placement and gives its capacity back; false when there was none. */
  release(sandboxId: string): Promise<boolean>;
  getPlacement(sandboxId: string): Promise<PlacementRow | undefined>;
  /** A host's placements, each with the control plane that starts it there (`placed_by`: null for an admin's reservation). */
  listPlacements(hostId: string): Promise<Array<PlacementRow & { placed_by: string | null }>>;
  /**
   * The status and placement of each of `ids` that has a sandbox row, in one query (a worker's
   * whole inventory at once); ids without a row are left out. Ordered by sandbox id.
   */
  whereabouts(ids: readonly string[]): Promise<SandboxWhereabouts[]>;
  /** How many placements in all. */
  countPlacements(): Promise<number>;
  /**
   * Starts left stranded: sandboxes placed on a host other than the control plane that placed
   * them (`placedBy`), where that control plane is `ownHostId` or its own host is LOST, and whose
   * sandbox is still PENDING or PROVISIONING or has no row at all (it stopped between placing and
   * admitting). Ordered by placement time.
   */
  strandedStarts(ownHostId: string): Promise<StrandedStart[]>;
  /**
   * Sandboxes placed on a host other than their placer's own, by a placer other than `ownHostId`
   * whose own host is LOST (a stopped control plane on a shared database), whatever their status
   * (no sandbox row: never admitted). Ordered by placement time.
   */
  placedByLostPeers(ownHostId: string): Promise<StrandedStart[]>;
  /**
   * Makes `to` the placer of a sandbox placed by `from`, in one conditional update: false when its
   * placer is no longer `from` (another survivor took it first) or it is placed nowhere.
   */
  takeOverPlacement(sandboxId: string, from: string, to: string): Promise<boolean>;
}
