import type { CheckpointRow } from "../../store/rows.js";
import type { RestoreLayers } from "../sandboxes/provisioner.js";
import type { RemoteHost } from "./host-names.js";

/**
 * A restore (a create with `checkpoint_id`, a fork's child) before it is placed: the checkpoint
 * and its chain's layer keys, which placement prefers hosts for, and the verification of the
 * layers on the host chosen: here (downloaded into this host's cache and checked), or on a worker
 * (sent the chain's records, it pulls and checks them itself). A failed check fails the call.
 */
export interface RestorePlan {
  kind: "plan";
  checkpoint: CheckpointRow;
  /** The chain's layer keys, top first. */
  layers: string[];
  memory: boolean;
  /** Whether every layer is in this host's own layer directory (for a store the hosts do not share). */
  localHolds: boolean;
  prepare(worker: RemoteHost | null): Promise<RestoreLayers>;
}

export function isRestorePlan(r: RestoreLayers | RestorePlan | null): r is RestorePlan {
  return r !== null && "kind" in r && r.kind === "plan";
}

/** Without fleet placement: the plan is verified here, before the admission. */
export async function placeHere<T>(
  restore: RestoreLayers | RestorePlan | null,
  admit: () => Promise<T>,
): Promise<{ worker: null; admitted: T; restore: RestoreLayers | null }> {
  const layers = isRestorePlan(restore) ? await restore.prepare(null) : restore;
  return { worker: null, admitted: await admit(), restore: layers };
}
