import { type CreateSandboxParams, type Sandbox, SandtreeError } from "@sandtree/protocol";
import type { HostRow } from "../../store/host-store.js";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { FleetService } from "./fleet-service.js";
import { isRestorePlan, type RestorePlan } from "./restore-plan.js";
import type { VolumeMoves } from "./volume-moves.js";

export interface RemoteSandboxesDeps {
  fleet: FleetService;
  store: Store;
  log: Logger;
  /** The workers this control plane reaches through their machine hosts (WorkerBundles.hostIds). */
  reachable: () => ReadonlySet<string>;
  /** Where a create's volumes live, which hosts mount them, and their moves between hosts (placement input). */
  volumes?: { moves: VolumeMoves };
}

/** A worker a create was placed on: its sandbox runs through that host's bundle (WorkerBundles). */
export interface PlacedWorker {
  id: string;
  name: string;
}

/**
 * Where a create runs on the fleet: this host or a worker (placement, or the admin's pin), with
 * the create's volumes moved to the host chosen and a restore kept where its layers are. The row in
 * this control plane's store stays the sandbox's record; its host is its placement.
 */
export class RemoteSandboxes {
  constructor(private readonly deps: RemoteSandboxesDeps) {}

  /**
   * Where a new sandbox runs: null for this host (also when no worker with a URL has joined:
   * single-box mode as before), or the worker placed (its reservation recorded). A pin names
   * the host and is never moved elsewhere. A restore prefers the hosts that hold the checkpoint's
   * layers; without a shared object store only those can take it (CHECKPOINT_NOT_ON_HOST).
   */
  async place(
    sb: Sandbox,
    params: CreateSandboxParams,
    restore: RestoreLayers | RestorePlan | null = null,
  ): Promise<PlacedWorker | null> {
    const { fleet } = this.deps;
    const pin = params.host;
    const pinned = pin ? await this.checkPin(pin) : null;
    const plan = isRestorePlan(restore) ? restore : null;
    const size = { vcpus: sb.cpu_cores, memory_mib: Math.round(sb.memory_gb * 1024), disk_gib: sb.disk_size_gb };
    const vols = await this.volumesOf(sb.team_id, params);
    if (params.checkpoint_id && !plan) {
      // Layers already verified on this host: the restore runs here.
      if (pinned && !fleet.isLocal(pinned.id))
        throw new SandtreeError("NOT_ON_REMOTE_HOST", "this restore runs on the control plane's own host: omit host", {
          field: "host",
        });
      await fleet.checkFits(size, (id) => fleet.isLocal(id));
      await this.volumesHere(vols);
      return null;
    }
    const urls = this.deps.reachable();
    let eligible = (hostId: string) => urls.has(hostId) || fleet.isLocal(hostId);
    // Before anything starts: a size no host could ever hold is refused with what the largest has.
    await fleet.checkFits(size, pinned ? (id) => id === pinned.id : eligible);
    const here = fleet.localHostId;
    if (urls.size === 0 && !pin && (!vols || (here !== null && (await vols.moves.mountsOn(here))))) {
      await this.volumesHere(vols);
      return null;
    }
    const holders = plan ? await this.holders(plan.checkpoint, plan.layers) : null;
    if (plan && holders) {
      eligible = (hostId) => (fleet.isLocal(hostId) ? plan.localHolds : urls.has(hostId) && holders.has(hostId));
      if ((pinned && !eligible(pinned.id)) || (!plan.localHolds && holders.size === 0)) {
        const where = pinned ? `host ${pinned.name}` : "any host that can take it";
        throw new SandtreeError(
          "CHECKPOINT_NOT_ON_HOST",
          `checkpoint ${plan.checkpoint.id} is not on ${where}: without an object store its layers stay on the host that took it`,
          { checkpoint_id: plan.checkpoint.id, ...(pinned ? { host: pinned.name } : {}) },
        );
      }
    }
    const homes = vols ? new Set(vols.rows.map((v) => vols.moves.homeOf(v))) : null;
    if (vols && homes) {
      const fits = eligible;
      // With moves: any host whose machines mount volumes (its own answer). Without: their home
      // only (this host's own mounts were checked by resolveMounts).
      const mounting = vols.moves.canMove() ? await this.mounting(vols.moves, [...urls, ...(here ? [here] : [])]) : homes;
      eligible = (hostId) => fits(hostId) && mounting.has(hostId);
      if (!vols.moves.canMove() && ((pinned && !homes.has(pinned.id)) || homes.size > 1)) {
        const on = await Promise.all([...homes].map((h) => (h ? fleet.hostName(h).catch(() => h) : "?")));
        throw new SandtreeError(
          "VOLUME_NOT_ON_HOST",
          `the volumes live on host ${on.join(", ")}${pinned ? `, not on ${pinned.name}` : ""}, and without an object store volumes do not move: omit host`,
          { field: "host", ...(pinned ? { host: pinned.name } : {}) },
        );
      }
      if (pinned && !mounting.has(pinned.id))
        throw new SandtreeError("NOT_SUPPORTED", `host ${pinned.name} cannot mount volumes: omit host`, {
          field: "host",
          host: pinned.name,
        });
    }
    const req = {
      sandbox_id: sb.id,
      vcpus: sb.cpu_cores,
      memory_mib: Math.round(sb.memory_gb * 1024),
      disk_gib: sb.disk_size_gb,
      layers: plan?.layers ?? [],
      ...(pin ? { host: pin } : {}),
    };
    const placed = await (async () => {
      // Volumes that can move still prefer their home: a move costs a copy through the object store.
      const home = homes?.size === 1 ? [...homes][0] : undefined;
      if (!pin && home && eligible(home)) {
        const there = await fleet.placeSandbox(req, (h) => h === home, { startsHere: true }).catch(() => null);
        if (there) return there;
      }
      return fleet.placeSandbox(req, eligible, { startsHere: true });
    })();
    if (vols) {
      try {
        for (const v of vols.rows) {
          const now = await vols.moves.moveTo(v, placed.host_id);
          if (v.home_lost_at && now.restored_as_of)
            await this.deps.store.addEvent(sb.id, `volume ${v.name} restored as of ${now.restored_as_of} (its host was lost)`);
        }
      } catch (err) {
        await this.unplace(sb.id);
        throw err;
      }
    }
    if (fleet.isLocal(placed.host_id)) return null;
    return { id: placed.host_id, name: await fleet.hostName(placed.host_id) };
  }

  /** A create's volumes as rows (their homes), or null when it mounts none (or volumes are not wired in). */
  private async volumesOf(teamId: string, params: CreateSandboxParams) {
    const v = this.deps.volumes;
    if (!v || !Array.isArray(params.volumes) || params.volumes.length === 0) return null;
    const rows = await Promise.all((params.volumes as Array<{ volume: string }>).map((m) => v.moves.row(teamId, m.volume)));
    return { ...v, rows };
  }

  /** The hosts among `ids` whose machines may mount volumes. */
  private async mounting(moves: VolumeMoves, ids: readonly string[]): Promise<Set<string>> {
    const ok = await Promise.all(ids.map(async (id) => [id, await moves.mountsOn(id)] as const));
    return new Set(ok.filter(([, yes]) => yes).map(([id]) => id));
  }

  /** A create that runs on this host without a placement: its volumes that live on a worker come home first. */
  private async volumesHere(vols: Awaited<ReturnType<RemoteSandboxes["volumesOf"]>>): Promise<void> {
    const here = this.deps.fleet.localHostId;
    if (!vols || !here) return;
    for (const v of vols.rows) if (v.host_id !== null) await vols.moves.moveTo(v, here);
  }

  /**
   * The hosts that hold a checkpoint's layers when the hosts share no object store (null when they
   * do: any host can restore it): those that report them, and the host of the sandbox it was taken from.
   */
  async holders(ck: CheckpointRow, layers: readonly string[] = ck.blob_key ? [ck.blob_key] : []): Promise<Set<string> | null> {
    const { fleet } = this.deps;
    if (fleet.sharesLayers()) return null;
    const ids = await fleet.hostsHolding(layers);
    const source = await fleet.placedOn(ck.sandbox_id);
    if (source) ids.add(source);
    return ids;
  }

  private async checkPin(name: string): Promise<HostRow> {
    const host = await this.deps.fleet.hostNamed(name);
    if (!host) throw new SandtreeError("HOST_NOT_FOUND", `no host named ${name}`, { host: name });
    if (host.state !== "ACTIVE") {
      const why = host.state === "LOST" ? "is LOST (no heartbeat)" : "is cordoned or draining";
      throw new SandtreeError("HOST_UNSCHEDULABLE", `host ${name} ${why}: it takes no new sandbox`, {
        host: name,
        state: host.state,
      });
    }
    if (!this.deps.fleet.isLocal(host.id) && !this.deps.reachable().has(host.id)) {
      throw new SandtreeError(
        "HOST_UNSCHEDULABLE",
        `host ${name} runs no sandboxes (this control plane does not reach its machine host)`,
        {
          host: name,
        },
      );
    }
    return host;
  }

  /** Gives back a reservation made by place() when the create did not go ahead. */
  async unplace(id: string): Promise<void> {
    await this.deps.fleet.release(id);
  }
}
