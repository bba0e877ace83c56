import { isRestorePlan } from "../fleet/restore-plan.js";
import type { NetworkService } from "../network/network-service.js";
import type { Provisioner } from "./provisioner.js";
import type { PlacementFactory, SandboxSite, SandboxStart } from "./sandbox-site.js";

/**
 * This host as a sandbox's site: its network gives the sandbox an address and rules, its
 * provisioner starts the machine, and the services that set up a guest (start hooks) see it start.
 */
export function hereSite(deps: {
  provisioner: Provisioner;
  network?: NetworkService;
  startHooks: ReadonlyArray<(start: SandboxStart) => void>;
  /** Pause and resume of a machine of this host (SandboxService's). */
  control(teamId: string, id: string, action: "pause" | "resume"): Promise<unknown>;
}): SandboxSite {
  return {
    verify: (plan) => plan.here(),
    async admitted(sb, params) {
      await deps.network?.register(sb.id, params);
      return {
        start: (credentials, restore, signal) => deps.provisioner.provision(sb, credentials, restore, signal),
        starting(start) {
          for (const hook of deps.startHooks) hook(start);
        },
      };
    },
    async control(teamId, id, action) {
      await deps.control(teamId, id, action);
    },
  };
}

/** Single-box placement: every sandbox runs on this host (a server with a fleet places with FleetPlacement). */
export const herePlacement: PlacementFactory = (here) => ({
  async placeAndAdmit(_sb, _params, admit, given) {
    // Verified before the admission, as a placed restore is.
    const restore = isRestorePlan(given) ? await here.verify(given) : given;
    return { site: here, admitted: await admit(), restore };
  },
  siteOf: async () => here,
  elsewhere: async () => new Set<string>(),
  teardown: async () => {},
});
