import { randomBytes, randomUUID } from "node:crypto";
import {
  type HeartbeatRequest,
  type HeartbeatResponse,
  type Host,
  type HostCapacity,
  HostLocality,
  type HostStateChange,
  type Placement,
  type PlacementRequest,
  type RegisterHostRequest,
  type RegisterHostResponse,
  SandtreeError,
} from "@sandtree/protocol";
import type { z } from "zod";
import type { HostRow, LostHost, SandboxWhereabouts, StrandedStart } from "../../store/host-store.js";
import type { Principal } from "../teams/auth-service.js";
import type { FleetServiceDeps } from "./fleet-deps.js";
import { HostCache } from "./host-cache.js";
import { checkFitsAmong, type SizeAsk } from "./host-fit.js";
import { registerWorker } from "./host-join.js";
import { isLocalHostName, LOCAL_HOST, placedOnPeers } from "./host-names.js";
import { hostView } from "./host-view.js";
import { bearer, loadOrCreateJoinToken, matchesHash, sha256Hex, workerCallKey } from "./join-token.js";
import { placeRanked } from "./place-ranked.js";

function requireAdmin(p: Principal, what: string): void {
  if (!p.isAdmin) throw new SandtreeError("FORBIDDEN", `${what} needs an admin key`);
}

/**
 * Fleet mode's control-plane side: the join token, host registration and heartbeats, the
 * admin view (list, cordon, drain), placement, and the reaper that marks silent hosts LOST.
 * Placement ranks hosts from an in-memory view (refreshed every second and after each
 * heartbeat) and records on the first the store accepts: the store re-checks the capacity in
 * one conditional update, so several control planes never overcommit a host.
 */
export class FleetService {
  readonly joinToken: string;
  /** True on the start that created the join token (the one that prints it). */
  readonly joinTokenCreated: boolean;
  readonly joinTokenFile: string;
  private readonly cache: HostCache;
  private timer: NodeJS.Timeout | null = null;
  private localId: string | null = null;
  private localBeat: (() => Promise<void>) | null = null;

  constructor(private readonly deps: FleetServiceDeps) {
    const t = deps.joinToken ?? loadOrCreateJoinToken(deps.dataDir);
    this.joinToken = t.token;
    this.joinTokenCreated = t.created;
    this.joinTokenFile = t.file;
    this.cache = new HostCache(deps.hosts);
  }

  private nowIso(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }

  /** `POST /v1/fleet/hosts/register`: the join token buys a host id and a per-host secret, shown once. */
  async register(authorization: string | undefined, req: z.output<typeof RegisterHostRequest>): Promise<RegisterHostResponse> {
    const r = await registerWorker(this.deps, this.cache, this.joinToken, authorization, req);
    // Opened from now on (WorkerBundles; placement waits for it); the worker answers the key of the secret it is about to hear.
    if (req.host_url) this.tellJoined(r.host_id, req.host_url);
    return r;
  }

  /** Tells, in the background, that a worker serves its host at `hostUrl` (its bundle opens; see WorkerBundles). */
  private tellJoined(hostId: string, hostUrl: string): void {
    void this.deps.events
      .emit("joined", hostId, hostUrl)
      .catch((err: Error) =>
        this.deps.log.warn({ host_id: hostId, url: hostUrl, err: err.message }, "after a registration: failed"),
      );
  }

  /** Host id -> machine host URL of every worker that serves its host. */
  async workerHostUrls(): Promise<Map<string, string>> {
    return (await this.deps.urls?.hostUrls()) ?? new Map();
  }

  /** Reads a host's registration again (its secret may have changed at another control plane, or before a restart). */
  async refreshHost(hostId: string): Promise<void> {
    const row = await this.deps.hosts.getHost(hostId);
    if (row) this.cache.remember(row);
  }

  /** The key a worker answers now (its latest secret's), as this process last saw its registration; null: unknown. */
  callKeyOf(hostId: string): string | null {
    const h = this.cache.get(hostId);
    return h ? workerCallKey(this.joinToken, hostId, h.secret_hash) : null;
  }

  /**
   * The sandboxes placed on a host: `mine`, those this control plane placed to start them itself (its
   * own, to supervise there), and `others`, those of its peers and admins' reservations (theirs).
   */
  async placementsOn(hostId: string): Promise<{ mine: Set<string>; others: Set<string> }> {
    const rows = await this.deps.hosts.listPlacements(hostId);
    const mine = new Set<string>();
    const others = new Set<string>();
    for (const p of rows) (p.placed_by === this.localId ? mine : others).add(p.sandbox_id);
    return { mine, others };
  }

  /** Sandboxes placed on workers by peer control planes whose own host is LOST (see PeerTakeover). */
  async placedByLostPeers(): Promise<StrandedStart[]> {
    return this.localId ? this.deps.hosts.placedByLostPeers(this.localId) : [];
  }

  /** Makes this control plane the placer of a sandbox `from` placed; false when another took it first. */
  async takeOver(sandboxId: string, from: string): Promise<boolean> {
    return this.localId ? this.deps.hosts.takeOverPlacement(sandboxId, from, this.localId) : false;
  }

  /** `POST /v1/fleet/hosts/{id}/heartbeat`, authenticated by the host's secret. */
  async heartbeat(id: string, authorization: string | undefined, beat: HeartbeatRequest): Promise<HeartbeatResponse> {
    const secret = bearer(authorization);
    // Made only when thrown: an error captures a stack, and heartbeats arrive hundreds a second.
    const refused = () => new SandtreeError("UNAUTHORIZED", "invalid host secret: register again with the join token");
    if (!secret) throw refused();
    let known = this.cache.get(id);
    if (!known || !matchesHash(secret, known.secret_hash)) {
      // Another control plane may have registered it (or again) since this one last looked.
      const row = await this.deps.hosts.getHost(id);
      if (!row || !matchesHash(secret, row.secret_hash) || isLocalHostName(row.name)) throw refused();
      known = this.cache.remember(row);
    }
    const row = await this.deps.hosts.heartbeat(id, {
      at: this.nowIso(),
      ...(beat.capacity ? { capacity: beat.capacity } : {}),
      ...(beat.locality ? { locality: HostLocality.parse(beat.locality) } : {}),
    });
    if (!row) throw refused();
    this.cache.remember(row);
    if (known.state === "LOST" && row.state !== "LOST") {
      this.deps.log.info({ host: row.name }, "host is back");
      // Its bundle is opened again: the machines of the sandboxes that ended while it was away are stopped.
      const hostUrl = await this.deps.urls?.hostUrls().then((u) => u.get(row.id));
      if (hostUrl) this.tellJoined(row.id, hostUrl);
    }
    return { host_id: row.id, state: row.state, heartbeat_interval_ms: this.deps.heartbeatIntervalMs };
  }

  /** `GET /v1/hosts` (admin). */
  async list(p: Principal): Promise<Host[]> {
    requireAdmin(p, "listing hosts");
    const urls = (await this.deps.urls?.all()) ?? new Map<string, string>();
    return (await this.deps.hosts.listHosts()).map((h) => hostView(h, urls.get(h.id) ?? null));
  }

  /** Cordon (and drain: the same, no new work; its sandboxes stay until they end) or uncordon. */
  async setCordon(p: Principal, name: string, cordoned: boolean): Promise<HostStateChange> {
    requireAdmin(p, cordoned ? "cordoning a host" : "uncordoning a host");
    const host = await this.deps.hosts.getHostByName(name);
    if (!host) throw new SandtreeError("HOST_NOT_FOUND", `no host named ${name}`, { host: name });
    const row = (await this.deps.hosts.setCordoned(host.id, cordoned)) ?? host;
    this.cache.remember(row);
    this.deps.log.info({ host: name, cordoned }, cordoned ? "host cordoned" : "host uncordoned");
    return { host: hostView(row, (await this.deps.urls?.get(row.id)) ?? null), remaining_sandboxes: row.usage.placements };
  }

  /**
   * `POST /v1/fleet/placements` (admin): decides a host and records the reservation; starts
   * nothing. Tries the ranked hosts in order while the store refuses (another control plane
   * took the room first).
   */
  async place(p: Principal, req: z.output<typeof PlacementRequest>): Promise<Placement> {
    requireAdmin(p, "placing");
    return this.placeSandbox(req);
  }

  /**
   * The placement of a create (the caller checked who may pin): decides, records, starts nothing.
   * `startsHere`: this process starts the sandbox there, which the placement records (a peer
   * finishes the start if this process is lost meanwhile; an admin's bare reservation has none).
   */
  async placeSandbox(
    req: z.output<typeof PlacementRequest>,
    eligible?: (hostId: string) => boolean,
    o: { startsHere?: boolean } = {},
  ): Promise<Placement> {
    return placeRanked(
      {
        hosts: this.deps.hosts,
        cache: this.cache,
        nowMs: this.deps.clock.now(),
        freshMs: this.deps.hostLostAfterMs,
        ...(o.startsHere && this.localId ? { placedBy: this.localId } : {}),
      },
      req,
      eligible,
    );
  }

  /** Refuses a size that no host (not LOST, among `eligible`) could hold even empty: host-fit.ts. */
  async checkFits(ask: SizeAsk, eligible: (hostId: string) => boolean): Promise<void> {
    checkFitsAmong((await this.cache.view()).values(), ask, eligible);
  }

  /**
   * Creates this control plane placed on a worker and no process is finishing: its own from
   * before a restart, and those of peers whose own host is LOST (see HostStore.strandedStarts).
   */
  async strandedStarts(): Promise<StrandedStart[]> {
    return this.localId ? this.deps.hosts.strandedStarts(this.localId) : [];
  }

  /** A host's state by id as the store has it now (undefined: no such host). */
  async hostState(id: string): Promise<HostRow["state"] | undefined> {
    return (await this.deps.hosts.getHost(id))?.state;
  }

  /** A host's name by id (for reasons and events). */
  async hostName(id: string): Promise<string> {
    return (this.cache.get(id)?.name ?? (await this.deps.hosts.getHost(id))?.name) || id;
  }

  /** The host a sandbox is placed on (its id), if any. */
  async placedOn(sandboxId: string): Promise<string | null> {
    return (await this.deps.hosts.getPlacement(sandboxId))?.host_id ?? null;
  }

  /** The status and placement of each of `ids` that has a sandbox row (one query). */
  whereabouts(ids: readonly string[]): Promise<SandboxWhereabouts[]> {
    return this.deps.hosts.whereabouts(ids);
  }

  /** Whether the host is this control plane's own (`local`). */
  isLocal(hostId: string): boolean {
    return hostId === this.localId;
  }

  /** Whether the hosts share an object store (S3): any host can restore any DURABLE checkpoint. */
  sharesLayers(): boolean {
    return this.deps.blobStore?.kind === "s3";
  }

  /** Hosts whose reported locality holds every one of these layers. */
  async hostsHolding(layers: readonly string[]): Promise<Set<string>> {
    const view = await this.cache.view();
    return new Set([...view.values()].filter((h) => layers.every((l) => h.layers.has(l))).map((h) => h.id));
  }

  /** A host by name (pinned creates check its state before placing). */
  hostNamed(name: string): Promise<HostRow | undefined> {
    return this.deps.hosts.getHostByName(name);
  }

  /** Gives a sandbox's reservation back (it ended); false when it had none. */
  release(sandboxId: string): Promise<boolean> {
    return this.deps.hosts.release(sandboxId);
  }

  /** `DELETE /v1/fleet/placements/{sandbox_id}` (admin). */
  releaseAsAdmin(p: Principal, sandboxId: string): Promise<boolean> {
    requireAdmin(p, "releasing a placement");
    return this.release(sandboxId);
  }

  /** The id of this control plane's own host once started (its sandboxes are placed there). */
  get localHostId(): string | null {
    return this.localId;
  }

  /** Registers the control plane's own host (single-box mode), under `local` (or its `local-<id>`). */
  async startLocal(
    capacity: HostCapacity,
    locality: z.input<typeof HostLocality>,
    beat: (() => Promise<void>) | null = null,
  ): Promise<void> {
    this.localBeat = beat;
    const row = await this.deps.hosts.registerHost({
      id: `host_${randomUUID().replaceAll("-", "").slice(0, 16)}`,
      name: this.deps.localHostName ?? LOCAL_HOST,
      capacity,
      locality: HostLocality.parse(locality),
      // Nobody holds this secret: the local host beats in-process.
      secret_hash: sha256Hex(randomBytes(32).toString("base64url")),
      at: this.nowIso(),
    });
    this.localId = row.id;
    this.cache.remember(row);
  }

  /** The local host's heartbeat, with its capacity and locality when they changed. */
  async beatLocal(update: { capacity?: HostCapacity; locality?: z.input<typeof HostLocality> } = {}): Promise<void> {
    if (!this.localId) return;
    const row = await this.deps.hosts.heartbeat(this.localId, {
      at: this.nowIso(),
      ...(update.capacity ? { capacity: update.capacity } : {}),
      ...(update.locality ? { locality: HostLocality.parse(update.locality) } : {}),
    });
    if (row) this.cache.remember(row);
  }

  /**
   * Records a sandbox of this control plane's own VMs on the local host, whatever its free
   * capacity (VMs overcommit; team quotas govern them): the host list shows its usage.
   */
  async placeLocal(s: { id: string; cpu_cores: number; memory_gb: number; disk_size_gb: number }): Promise<void> {
    if (!this.localId) return;
    // Placed already (a create placed on a worker, or here by placement): recorded.
    if (await this.deps.hosts.getPlacement(s.id)) return;
    await this.deps.hosts.place(
      {
        sandbox_id: s.id,
        host_id: this.localId,
        vcpus: s.cpu_cores,
        memory_mib: Math.round(s.memory_gb * 1024),
        disk_gib: s.disk_size_gb,
        placed_at: this.nowIso(),
      },
      { freshSince: this.nowIso(), force: true },
    );
  }

  /**
   * Sandboxes placed on another control plane's own host (`local-<id>` hosts but this one's): on a
   * shared database, that process runs them, times them out and gives them their network.
   */
  peerPlacements(): Promise<Set<string>> {
    return placedOnPeers(this.deps.hosts, this.deps.localHostName ?? LOCAL_HOST);
  }

  /** Placements on the local host, for reconciling them with the sandboxes at start. */
  async localPlacements(): Promise<string[]> {
    if (!this.localId) return [];
    return (await this.deps.hosts.listPlacements(this.localId)).map((p) => p.sandbox_id);
  }

  /**
   * Marks hosts silent for longer than `hostLostAfterMs` LOST and tells each, with its sandboxes,
   * as the event `lost`, then `reaped`. The local host beats first: it lives as long as this process.
   */
  async reap(): Promise<LostHost[]> {
    await (this.localBeat ? this.localBeat() : this.beatLocal()).catch((err: Error) =>
      this.deps.log.warn({ err: err.message }, "the local host's heartbeat failed"),
    );
    const staleBefore = new Date(this.deps.clock.now() - this.deps.hostLostAfterMs).toISOString();
    const lost = await this.deps.hosts.markLost(staleBefore);
    for (const l of lost) {
      this.cache.remember(l.host);
      this.deps.log.warn(
        { host: l.host.name, last_heartbeat_at: l.host.last_heartbeat_at, sandboxes: l.sandboxIds.length },
        "host lost: no heartbeat",
      );
      try {
        await this.deps.events.emit("lost", l);
      } catch (err) {
        this.deps.log.error({ host: l.host.name, err: (err as Error).message }, "handling a lost host failed");
      }
    }
    await this.deps.events
      .emit("reaped")
      .catch((err: Error) => this.deps.log.error({ err: err.message }, "after reaping: failed"));
    return lost;
  }

  /** Starts the reaper (and the local host's heartbeat, which it sends first). */
  start(): void {
    if (this.timer) return;
    const every = Math.max(100, Math.min(this.deps.heartbeatIntervalMs, Math.floor(this.deps.hostLostAfterMs / 3)));
    this.timer = setInterval(() => {
      void this.reap().catch((err: Error) => this.deps.log.error({ err: err.message }, "host reaper failed"));
    }, every);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
