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

/** How long a reset on another host than the one that took the checkpoint waits for it to be stored. */
const WAIT_DURABLE_MS = 300_000;

/**
 * Where a sandbox's checkpoints are taken and its resets done: the bundle of the host it runs on
 * (CheckpointService and SandboxService, the records kept here). Callers ask `CheckpointSites.of`.
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

/** Every sandbox's checkpoints taken through its host's bundle. */
export function bundleCheckpoints(checkpoints: CheckpointService, sandboxes: SandboxService): CheckpointSites {
  const site = hereCheckpoints(checkpoints, sandboxes);
  return { of: async () => site };
}

/** The checkpoints of the sandboxes of this service's bundles as a site. */
export function hereCheckpoints(checkpoints: CheckpointService, sandboxes: SandboxService): CheckpointSite {
  return {
    take: (teamId, sandboxId, opts) => checkpoints.create(teamId, sandboxId, opts),
    readyForChildren: async () => {},
    async reset(teamId, id, raw) {
      const body = parse(ResetRequest, raw ?? {});
      const release = checkpoints.hold(body.checkpoint_id);
      try {
        const machine = await sandboxes.running(teamId, id);
        const on = sandboxes.bundles.of(id);
        // A peer control plane's sandbox (reached here, see PeerTakeover): its machine is its placer's to replace.
        if (on.machines.get(id) !== machine)
          throw new SandtreeError("NOT_ON_REMOTE_HOST", `sandbox ${id} is reset through the control plane that placed it`, {
            id,
          });
        // A FROZEN layer lies on the host that took it: another host reads it from the store.
        if (on !== sandboxes.bundles.local) await checkpoints.waitDurable(teamId, body.checkpoint_id, WAIT_DURABLE_MS);
        const { row, layer, memState } = await checkpoints.restorePath(teamId, body.checkpoint_id, undefined, {
          memory: true,
          on,
        });
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
