import { type CreateSandboxParams, type Sandbox, type SandboxReport, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import { z } from "zod";
import type { HostRow } from "../../store/host-store.js";
import type { CheckpointRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "../sandboxes/error-end.js";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import { ACTIVE } from "../sandboxes/sandbox-machines.js";
import type { FleetService } from "./fleet-service.js";
import type { RemoteHost } from "./host-names.js";
import { isRestorePlan, type RestorePlan } from "./restore-plan.js";
import type { VolumeMoves } from "./volume-moves.js";
import { WorkerClient } from "./worker-client.js";

export interface RemoteSandboxesDeps {
  fleet: FleetService;
  store: Store;
  log: Logger;
  /** How long a worker may take to bring a sandbox to RUNNING (default 10 min). */
  startDeadlineMs?: number;
  /** Where a create's volumes live, and their moves between hosts (placement input). */
  volumes?: {
    moves: VolumeMoves;
    /** Whether this control plane's own host can mount volumes (it runs NFS-Ganesha). */
    localMounts: boolean;
  };
}

/** What a worker answers for one of its sandboxes (the fields the control plane reads of it). */
export const WorkerSandbox = z.looseObject({
  id: z.string(),
  status: z.string(),
  error_reason: z.string().nullable().optional(),
  image_digest: z.string().nullable().optional(),
});

export interface PlaceOptions {
  /**
   * Refuse a size no host could hold (EXCEEDS_HOST_CAPACITY). Off for a create a control plane
   * placed on this worker: it checked its fleet, which knows the capacity this worker offers.
   */
  checkFit?: boolean;
}

/**
 * The control plane's side of sandboxes that run on workers: where a create goes (placement,
 * or the admin's pin), starting it on the worker with the same id and spec (quotas, keys and
 * validation stayed here), and deleting it there when it ends here. The row in this control
 * plane's store stays the sandbox's record; its host is its placement.
 */
export class RemoteSandboxes {
  /**
   * Sandbox id -> the id of the worker that holds it (null: this host). Sandboxes never move;
   * a worker's URL and key are read again for each call (its key changes when it registers again).
   */
  private readonly where = new Map<string, string | null>();
  /** Creates this process placed and has not finished starting (no other process takes them over). */
  private readonly starting = new Set<string>();
  readonly client = new WorkerClient();

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
    o: PlaceOptions = {},
  ): Promise<RemoteHost | null> {
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
      if (o.checkFit) await fleet.checkFits(size, (id) => fleet.isLocal(id));
      await this.volumesHere(vols);
      return null;
    }
    const urls = await fleet.workerUrls();
    let eligible = (hostId: string) => urls.has(hostId) || fleet.isLocal(hostId);
    // Before anything starts: a size no host could ever hold is refused with what the largest has.
    if (o.checkFit) await fleet.checkFits(size, pinned ? (id) => id === pinned.id : eligible);
    if (urls.size === 0 && !pin && (!vols || vols.localMounts)) {
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
      const mounts = (hostId: string) => fits(hostId) && (!fleet.isLocal(hostId) || vols.localMounts);
      // Without moves the volumes' home is the only choice (this host's own mounts were checked by resolveMounts).
      eligible = vols.moves.canMove() ? mounts : (hostId) => fits(hostId) && homes.has(hostId);
      if (!vols.moves.canMove() && ((pinned && !homes.has(pinned.id)) || homes.size > 1)) {
        const on = await Promise.all([...homes].map((h) => (h ? fleet.hostName(h).catch(() => h) : "?")));
        throw new SandtreeError(
          "VOLUME_NOT_ON_HOST",
          `the volumes live on host ${on.join(", ")}${pinned ? `, not on ${pinned.name}` : ""}, and without an object store volumes do not move: omit host`,
          { field: "host", ...(pinned ? { host: pinned.name } : {}) },
        );
      }
    }
    const req = {
      sandbox_id: sb.id,
      vcpus: sb.cpu_cores,
      memory_mib: Math.round(sb.memory_gb * 1024),
      disk_gib: sb.disk_size_gb,
      layers: plan?.layers ?? [],
      ...(pin ? { host: pin } : {}),
    };
    // Before the placement is recorded: a sweep of stranded starts must never take this one over.
    this.starting.add(sb.id);
    const placed = await (async () => {
      // Volumes that can move still prefer their home: a move costs a copy through the object store.
      const home = homes?.size === 1 ? [...homes][0] : undefined;
      if (!pin && home && eligible(home)) {
        const there = await fleet.placeSandbox(req, (h) => h === home, { startsHere: true }).catch(() => null);
        if (there) return there;
      }
      return fleet.placeSandbox(req, eligible, { startsHere: true });
    })().catch((err: unknown) => {
      this.starting.delete(sb.id);
      throw err;
    });
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
    const remote = await fleet.remoteHost(placed.host_id);
    this.where.set(sb.id, remote ? remote.id : null);
    if (!remote) this.starting.delete(sb.id);
    return remote;
  }

  /** A create's volumes as rows (their homes), or null when it mounts none (or volumes are not wired in). */
  private async volumesOf(teamId: string, params: CreateSandboxParams) {
    const v = this.deps.volumes;
    if (!v || !Array.isArray(params.volumes) || params.volumes.length === 0) return null;
    const rows = await Promise.all((params.volumes as Array<{ volume: string }>).map((m) => v.moves.row(teamId, m.volume)));
    return { ...v, rows };
  }

  /** A create that runs on this host without a placement: its volumes that live on a worker come home first. */
  private async volumesHere(vols: Awaited<ReturnType<RemoteSandboxes["volumesOf"]>>): Promise<void> {
    const here = this.deps.fleet.localHostId;
    if (!vols || !here) return;
    for (const v of vols.rows) if (v.host_id !== null) await vols.moves.moveTo(v, here);
  }

  private async volumeIds(teamId: string, mounts: ReadonlyArray<{ volume: string }>) {
    const v = this.deps.volumes;
    if (!v) return mounts;
    return Promise.all(mounts.map(async (m) => ({ ...m, volume: (await v.moves.row(teamId, m.volume)).id })));
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
    if (!this.deps.fleet.isLocal(host.id) && !(await this.deps.fleet.remoteHost(host.id))) {
      throw new SandtreeError("HOST_UNSCHEDULABLE", `host ${name} runs no sandboxes (it registered without a URL)`, {
        host: name,
      });
    }
    return host;
  }

  /** Gives back a reservation made by place() when the create did not go ahead. */
  async unplace(id: string): Promise<void> {
    this.where.delete(id);
    this.starting.delete(id);
    await this.deps.fleet.release(id);
  }

  /** Whether this process is starting the sandbox on a worker (placed, not yet RUNNING or failed). */
  isStarting(id: string): boolean {
    return this.starting.has(id);
  }

  /** The worker holding a sandbox, or null when it runs here. */
  async hostOf(id: string): Promise<RemoteHost | null> {
    const known = this.where.get(id);
    if (known === null) return null;
    if (known !== undefined) return this.deps.fleet.remoteHost(known);
    const remote = await this.deps.fleet.remoteOf(id);
    this.where.set(id, remote ? remote.id : null);
    return remote;
  }

  /** The worker holding a team's sandbox; null when it runs here, or is not the team's (or none). */
  async hostOfTeams(teamId: string, id: string): Promise<RemoteHost | null> {
    return (await this.deps.store.getSandbox(id, teamId)) ? this.hostOf(id) : null;
  }

  /**
   * Starts the sandbox on its worker and follows it to RUNNING, moving this row along
   * (PENDING -> PROVISIONING -> RUNNING, or ERROR with the worker's reason).
   */
  async start(host: RemoteHost, sb: Sandbox, params: CreateSandboxParams, signal: AbortSignal): Promise<void> {
    const { store, log } = this.deps;
    try {
      if (!(await store.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"]))) return;
      const { host: _pin, idempotency_key: _key, ...spec } = params;
      // A restore's image and disk come from the checkpoint (the worker refuses them given).
      const { image: _image, disk_size_gb: _disk, ...restore } = spec;
      // The image as this server resolved it (an alias's target: the worker knows no aliases).
      const given = params.checkpoint_id ? restore : { ...spec, image: sb.image };
      // The worker knows a volume by the control plane's id (its own copy is named so), never by its name.
      const body = Array.isArray(given.volumes) ? { ...given, volumes: await this.volumeIds(sb.team_id, given.volumes) } : given;
      await this.client.call(host, "POST", "/v1/sandboxes", { body, sandboxId: sb.id, signal });
      const deadline = AbortSignal.any([signal, AbortSignal.timeout(this.deps.startDeadlineMs ?? 600_000)]);
      for (;;) {
        const w = WorkerSandbox.parse(await this.client.call(host, "GET", `/v1/sandboxes/${sb.id}`, { signal: deadline }));
        if (w.status === "RUNNING") {
          const patch = {
            status: "RUNNING" as const,
            started_at: new Date().toISOString(),
            image_digest: w.image_digest ?? null,
          };
          if (!(await store.updateSandbox(sb.id, patch, ["PROVISIONING"]))) {
            // A peer that took this start over (this process looked lost) may have finished it.
            if ((await store.getSandbox(sb.id))?.status === "RUNNING") return;
            throw new SandtreeError("SANDBOX_NOT_RUNNING", "sandbox was deleted while provisioning", { id: sb.id });
          }
          await store.addEvent(sb.id, `running on host ${host.name}`);
          return;
        }
        if ((TERMINAL_STATUSES as readonly string[]).includes(w.status))
          throw new Error(`on host ${host.name}: ${w.status}${w.error_reason ? `: ${w.error_reason}` : ""}`);
        await new Promise<void>((resolve) => setTimeout(resolve, 200));
        deadline.throwIfAborted();
      }
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      await this.client.call(host, "DELETE", `/v1/sandboxes/${sb.id}`, {}).catch(() => {});
      const end = errorEnd("START_FAILED", reason);
      if (await store.updateSandbox(sb.id, end, ["PENDING", "PROVISIONING"])) {
        await store.addEvent(sb.id, `error: ${reason}`);
        log.warn({ sandbox: sb.id, host: host.name, reason }, "starting on a worker failed");
      }
    } finally {
      this.starting.delete(sb.id);
    }
  }

  /** A sandbox ended here: it ends on its worker too (its reservation is released with its status). */
  async teardown(id: string): Promise<void> {
    const host = await this.hostOf(id).catch(() => null);
    this.where.delete(id);
    if (!host) return;
    await this.client.call(host, "DELETE", `/v1/sandboxes/${id}`, {}).catch((err: Error) => {
      this.deps.log.warn({ sandbox: id, host: host.name, err: err.message }, "deleting on the worker failed");
    });
  }

  /**
   * A worker's heartbeat reported status changes: a sandbox that ended there (its own timeout,
   * its VM exited) ends here with the worker's reason; pauses and resumes are followed. Only
   * sandboxes placed on that host are touched.
   */
  async applyReports(host: HostRow, reports: SandboxReport[]): Promise<void> {
    const { store, fleet } = this.deps;
    for (const r of reports) {
      if ((await fleet.placedOn(r.id)) !== host.id) continue;
      if (!(TERMINAL_STATUSES as readonly string[]).includes(r.status)) {
        await this.follow(r.id, r);
        continue;
      }
      const reason = r.error_reason ? `on host ${host.name}: ${r.error_reason}` : null;
      const end = {
        status: r.status,
        error_reason: reason,
        error_code: r.error_code ?? null,
        terminated_at: new Date().toISOString(),
      };
      if (await store.updateSandbox(r.id, end, ACTIVE)) {
        await store.addEvent(r.id, `${r.status} on host ${host.name}${r.error_reason ? `: ${r.error_reason}` : ""}`);
      }
      this.where.delete(r.id);
    }
  }

  /**
   * Of the sandboxes a worker says it runs, those it must end: their record here has ended
   * (marked HOST_LOST while the worker was away, a create abandoned by a control plane that
   * stopped), was never here, or places the sandbox on another host. Without this a worker that
   * comes back keeps VMs nobody can reach or bill.
   */
  async endedAmong(host: HostRow, running: string[]): Promise<string[]> {
    const known = new Map((await this.deps.fleet.whereabouts(running)).map((w) => [w.sandbox_id, w]));
    const end = running.filter((id) => {
      const w = known.get(id);
      return !w || TERMINAL_STATUSES.includes(w.status) || (w.host_id !== null && w.host_id !== host.id);
    });
    if (end.length)
      this.deps.log.warn({ host: host.name, sandboxes: end }, "ending sandboxes a worker ran after their record here ended");
    return end;
  }

  /** Pause or resume of a sandbox on its worker: done there, followed here. */
  async controlOn(host: RemoteHost, id: string, action: "pause" | "resume"): Promise<void> {
    await this.follow(id, await this.client.call(host, "POST", `/v1/sandboxes/${id}/${action}`, {}));
  }

  /** Applies a status the worker answered (pause, resume) to this control plane's row. */
  async follow(id: string, answer: unknown): Promise<void> {
    const w = WorkerSandbox.safeParse(answer);
    if (!w.success || w.data.id !== id) return;
    if (w.data.status === "PAUSED") await this.deps.store.updateSandbox(id, { status: "PAUSED" }, ["RUNNING"]);
    else if (w.data.status === "RUNNING") await this.deps.store.updateSandbox(id, { status: "RUNNING" }, ["PAUSED"]);
  }
}
