import type { CheckpointRow } from "../../store/rows.js";
import type { CheckpointService } from "./checkpoint-service.js";

export interface TakeOptions {
  ttlSeconds?: number;
  includeMemory?: boolean;
  /** The id to take it under (a control plane's, on a worker). */
  id?: string;
}

/**
 * Where a sandbox's checkpoints are taken: this host (CheckpointService) or the fleet worker it
 * runs on (RemoteCheckpoints, the record kept here). Callers ask `CheckpointSites.of` and never
 * branch on which it is.
 */
export interface CheckpointSite {
  take(teamId: string, sandboxId: string, opts: TakeOptions): Promise<CheckpointRow>;
  /**
   * Resolves once children placed on any host may start from it: a FROZEN checkpoint taken here
   * already may (a placement elsewhere waits itself); one taken on a worker is stored first (DURABLE).
   */
  readyForChildren(teamId: string, checkpointId: string, waitMs: number): Promise<void>;
}

/** Finds the site of a sandbox's checkpoints (another team's sandbox, or none: this host's, which answers 404). */
export interface CheckpointSites {
  of(teamId: string, sandboxId: string): Promise<CheckpointSite>;
}

/** This host's checkpoints as a site. */
export function hereCheckpoints(checkpoints: CheckpointService): CheckpointSite {
  return {
    take: (teamId, sandboxId, opts) => checkpoints.create(teamId, sandboxId, opts),
    readyForChildren: async () => {},
  };
}
