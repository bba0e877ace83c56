import type { CheckpointRow } from "../../store/rows.js";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { RemoteHost } from "./host-names.js";

/**
 * A restore (a create with `checkpoint_id`, a fork's child) before it is placed: the checkpoint
 * and its chain's layer keys, which placement prefers hosts for, and the verification of the
 * layers on the site chosen, which calls the one that fits it: `here` (downloaded into this
 * host's cache and checked) or `on` a worker (sent the chain's records, it pulls and checks them
 * itself). A failed check fails the call.
 */
export interface RestorePlan {
  kind: "plan";
  checkpoint: CheckpointRow;
  /** The chain's layer keys, top first. */
  layers: string[];
  memory: boolean;
  /** Whether every layer is in this host's own layer directory (for a store the hosts do not share). */
  localHolds: boolean;
  here(): Promise<RestoreLayers>;
  on(worker: RemoteHost): Promise<RestoreLayers>;
}

export function isRestorePlan(r: RestoreLayers | RestorePlan | null): r is RestorePlan {
  return r !== null && "kind" in r && r.kind === "plan";
}
