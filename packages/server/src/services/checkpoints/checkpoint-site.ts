import { ResetRequest, type Sandbox, SandtreeError } from "@sandtree/protocol";
import { parse } from "../../errors.js";
import type { CheckpointRow } from "../../store/rows.js";
import { refuseOtherMachine } from "../sandboxes/machine-identity.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import type { CheckpointService } from "./checkpoint-service.js";

export interface TakeOptions {
  ttlSeconds?: number;
  includeMemory?: boolean;
  /** The id to take it under (a control plane's, on a worker). */
  id?: string;
}

/**
 * Where a sandbox's checkpoints are taken and its resets done: this host (CheckpointService and
 * SandboxService) or the fleet worker it runs on (RemoteCheckpoints, the records kept here).
 * Callers ask `CheckpointSites.of` and never branch on which it is.
 */
export interface CheckpointSite {
  take(teamId: string, sandboxId: string, opts: TakeOptions): Promise<CheckpointRow>;
  /**
   * Resolves once children placed on any host may start from it: a FROZEN checkpoint taken here
   * already may (a placement elsewhere waits itself); one taken on a worker is stored first (DURABLE).
   */
  readyForChildren(teamId: string, checkpointId: string, waitMs: number): Promise<void>;
  /** Puts the running sandbox back to a memory checkpoint's state (a ResetRequest), keeping its id. */
  reset(teamId: string, sandboxId: string, raw: unknown): Promise<Sandbox>;
}

/** Finds the site of a sandbox's checkpoints (another team's sandbox, or none: this host's, which answers 404). */
export interface CheckpointSites {
  of(teamId: string, sandboxId: string): Promise<CheckpointSite>;
}

/** This host's checkpoints as a site. */
export function hereCheckpoints(checkpoints: CheckpointService, sandboxes: SandboxService): CheckpointSite {
  return {
    take: (teamId, sandboxId, opts) => checkpoints.create(teamId, sandboxId, opts),
    readyForChildren: async () => {},
    async reset(teamId, id, raw) {
      const body = parse(ResetRequest, raw ?? {});
      const release = checkpoints.hold(body.checkpoint_id);
      try {
        const { row, layer, memState } = await checkpoints.restorePath(teamId, body.checkpoint_id, undefined, { memory: true });
        if (!memState) throw new SandtreeError("CHECKPOINT_HAS_NO_MEMORY", `checkpoint ${row.id} has no memory`);
        const sb = await sandboxes.get(teamId, id);
        refuseOtherMachine(row, { accel: sb.accel, nested: sb.nested_virtualization }, `sandbox ${id}`);
        return await sandboxes.reset(teamId, id, {
          checkpointId: row.id,
          layerName: layer,
          memState,
          memoryMb: row.memory_mb,
          cpuCores: row.cpu_cores,
        });
      } finally {
        release();
      }
    },
  };
}
