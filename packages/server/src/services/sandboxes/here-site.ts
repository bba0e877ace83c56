import { isRestorePlan } from "../fleet/restore-plan.js";
import type { HostBundle } from "./sandbox-parts.js";
import type { PlacementFactory, SandboxSite, SandboxStart } from "./sandbox-site.js";

/**
 * A host's bundle as a sandbox's site: the host's network gives the sandbox an address and rules,
 * its provisioner starts the machine, and the services that set up a guest (start hooks) see it start.
 */
export function hereSite(
  bundle: HostBundle,
  deps: {
    startHooks: ReadonlyArray<(start: SandboxStart) => void>;
    /** Records the sandbox as placed on this bundle (HostBundles.place). */
    placed(id: string): void;
    /** Pause and resume of a machine of this host (SandboxService's). */
    control(teamId: string, id: string, action: "pause" | "resume"): Promise<unknown>;
  },
): SandboxSite {
  return {
    verify: (plan) => plan.here(),
    async admitted(sb, params) {
      deps.placed(sb.id);
      await bundle.network?.register(sb.id, params);
      return {
        start: (credentials, restore, signal) => bundle.provisioner.provision(sb, credentials, restore, signal),
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
