import type { CheckpointService } from "../checkpoints/checkpoint-service.js";
import { type CheckpointSite, type CheckpointSites, hereCheckpoints } from "../checkpoints/checkpoint-site.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import type { RemoteHost } from "./host-names.js";
import type { RemoteCheckpoints } from "./remote-checkpoints.js";
import type { RemoteSandboxes } from "./remote-sandboxes.js";

/**
 * The control plane's checkpoint sites: a sandbox on a worker is checkpointed there (the record
 * kept here), every other one here. In single-box mode no sandbox is on a worker.
 */
export class FleetCheckpointSites implements CheckpointSites {
  private readonly here: CheckpointSite;

  constructor(
    private readonly deps: {
      remote: RemoteSandboxes;
      checkpoints: CheckpointService;
      sandboxes: SandboxService;
      onWorkers: RemoteCheckpoints;
    },
  ) {
    this.here = hereCheckpoints(deps.checkpoints, deps.sandboxes);
  }

  async of(teamId: string, sandboxId: string): Promise<CheckpointSite> {
    const host = await this.deps.remote.hostOfTeams(teamId, sandboxId);
    return host ? this.worker(host) : this.here;
  }

  private worker(host: RemoteHost): CheckpointSite {
    const { checkpoints, onWorkers } = this.deps;
    return {
      take: (teamId, sandboxId, opts) => onWorkers.createOn(host, teamId, sandboxId, opts),
      readyForChildren: async (teamId, checkpointId, waitMs) => {
        await checkpoints.waitDurable(teamId, checkpointId, waitMs);
      },
      reset: (teamId, sandboxId, raw) => onWorkers.resetOn(host, teamId, sandboxId, raw),
    };
  }
}
