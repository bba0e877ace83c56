import type { CheckpointRow } from "../../store/rows.js";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { HostBundle } from "../sandboxes/sandbox-parts.js";

/**
 * A restore (a create with `checkpoint_id`, a fork's child) before it is placed: the checkpoint
 * and its chain's layer keys, which placement prefers hosts for, and the verification of the
 * layers `on` the bundle of the host chosen (its image base linked, the chain fetched into its
 * layers directory and checked there). A failed check fails the call.
 */
export interface RestorePlan {
  kind: "plan";
  checkpoint: CheckpointRow;
  /** The chain's layer keys, top first. */
  layers: string[];
  memory: boolean;
  /** Whether every layer is in this host's own layer directory (for a store the hosts do not share). */
  localHolds: boolean;
  on(bundle: HostBundle): Promise<RestoreLayers>;
}

export function isRestorePlan(r: RestoreLayers | RestorePlan | null): r is RestorePlan {
  return r !== null && "kind" in r && r.kind === "plan";
}
