import type { CreateSandboxParams, Sandbox } from "@sandtree/protocol";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { Placed, Placement, SandboxSite } from "../sandboxes/sandbox-site.js";
import type { RemoteHost } from "./host-names.js";
import type { RemoteSandboxes } from "./remote-sandboxes.js";
import { isRestorePlan, type RestorePlan } from "./restore-plan.js";

/**
 * A fleet worker as a sandbox's site: it sets up the sandbox's network and its guest itself;
 * the restore's layers are sent there and checked there; the start is done there and followed here.
 */
export function workerSite(remote: RemoteSandboxes, host: RemoteHost): SandboxSite {
  return {
    verify: (plan) => plan.on(host),
    admitted: async (sb, params) => ({
      start: (_credentials, _restore, signal) => remote.start(host, sb, params, signal),
      starting: () => {},
    }),
    control: (_teamId, id, action) => remote.controlOn(host, id, action),
  };
}

/**
 * The control plane's placement: a create goes to this host or to a worker (RemoteSandboxes.place,
 * also in single-box mode, where no worker has joined and every create stays here), answered as
 * that host's site.
 */
export class FleetPlacement implements Placement {
  constructor(
    private readonly remote: RemoteSandboxes,
    private readonly here: SandboxSite,
    /** The sandboxes placed on workers (their machines run there). */
    private readonly onWorkers: () => Promise<Set<string>>,
  ) {}

  /** place(), then the restore's layers checked on the site, then `admit`; a refused or replayed create gives the reservation back. */
  async placeAndAdmit<T extends { created: boolean }>(
    sb: Sandbox,
    params: CreateSandboxParams,
    admit: () => Promise<T>,
    given: RestoreLayers | RestorePlan | null,
    o: { checkFit: boolean },
  ): Promise<Placed<T>> {
    const worker = await this.remote.place(sb, params, given, o);
    const site = worker ? workerSite(this.remote, worker) : this.here;
    let admitted: T;
    let restore: RestoreLayers | null;
    try {
      restore = isRestorePlan(given) ? await site.verify(given) : given;
      admitted = await admit();
    } catch (err) {
      await this.remote.unplace(sb.id);
      throw err;
    }
    if (!admitted.created) await this.remote.unplace(sb.id);
    return { site, admitted, restore };
  }

  async siteOf(teamId: string, id: string): Promise<SandboxSite> {
    const worker = await this.remote.hostOfTeams(teamId, id);
    return worker ? workerSite(this.remote, worker) : this.here;
  }

  elsewhere(): Promise<Set<string>> {
    return this.onWorkers();
  }

  /** A sandbox that ends here ends on its worker too (its reservation is released with its status). */
  teardown(id: string): Promise<void> {
    return this.remote.teardown(id);
  }
}
