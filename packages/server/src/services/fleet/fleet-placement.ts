import { type CreateSandboxParams, type Sandbox, SandtreeError } from "@sandtree/protocol";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { HostSites, Placed, Placement, SandboxSite } from "../sandboxes/sandbox-site.js";
import type { FleetService } from "./fleet-service.js";
import type { RemoteSandboxes } from "./remote-sandboxes.js";
import { isRestorePlan, type RestorePlan } from "./restore-plan.js";

/**
 * The control plane's placement: a create goes to this host or to a worker (RemoteSandboxes.place,
 * also in single-box mode, where no worker has joined and every create stays here), answered as
 * that host's site: the site of its bundle (a worker's: its remote host, see WorkerBundles).
 */
export class FleetPlacement implements Placement {
  constructor(
    private readonly remote: RemoteSandboxes,
    private readonly fleet: FleetService,
    private readonly here: SandboxSite,
    private readonly hosts: HostSites,
    /** The sandboxes placed on workers (their machines run there). */
    private readonly onWorkers: () => Promise<Set<string>>,
    /** Settles once a worker's bundle being opened (it just joined) is open. */
    private readonly opened: (hostId: string) => Promise<void>,
  ) {}

  /** place(), then the restore's layers checked on the site, then `admit`; a refused or replayed create gives the reservation back. */
  async placeAndAdmit<T extends { created: boolean }>(
    sb: Sandbox,
    params: CreateSandboxParams,
    admit: () => Promise<T>,
    given: RestoreLayers | RestorePlan | null,
  ): Promise<Placed<T>> {
    const worker = await this.remote.place(sb, params, given);
    let admitted: T;
    let restore: RestoreLayers | null;
    let site = this.here;
    try {
      if (worker) {
        await this.opened(worker.id);
        const there = this.hosts.on(worker.name);
        // Lost between its placement and now: the create is refused, its reservation given back.
        if (!there) throw new SandtreeError("UNAVAILABLE", `host ${worker.name} is no longer reachable: try again`);
        site = there;
      }
      restore = isRestorePlan(given) ? await site.verify(given) : given;
      admitted = await admit();
    } catch (err) {
      await this.remote.unplace(sb.id);
      throw err;
    }
    if (!admitted.created) await this.remote.unplace(sb.id);
    return { site, admitted, restore };
  }

  /** The site of the host a sandbox is placed on (a lost worker's, or none: this host's, which answers 404 or not running). */
  async siteOf(_teamId: string, id: string): Promise<SandboxSite> {
    const hostId = await this.fleet.placedOn(id);
    if (!hostId || this.fleet.isLocal(hostId)) return this.here;
    return this.hosts.on(await this.fleet.hostName(hostId)) ?? this.here;
  }

  elsewhere(): Promise<Set<string>> {
    return this.onWorkers();
  }

  /** Nothing is left at the site: the sandbox's bundle tore its machine down (its reservation is released with its status). */
  async teardown(_id: string): Promise<void> {}
}
