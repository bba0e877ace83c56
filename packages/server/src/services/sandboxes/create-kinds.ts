import type { CreateSandboxParams, Sandbox } from "@sandtree/protocol";
import type { RestorePlan } from "../fleet/restore-plan.js";
import type { RestoreLayers } from "./provisioner.js";

// The two kinds of create, told apart by their types: a restore cannot reach the sandbox service
// without the plan its checkpoint's verification made.

/** A create from an image: it names no checkpoint (one that does is a CheckpointCreate). */
export type ImageCreate = CreateSandboxParams & { checkpoint_id?: undefined };

/** A create from a checkpoint, with the plan its verification made (its layers are checked where it is placed). */
export interface CheckpointCreate {
  params: CreateSandboxParams & { checkpoint_id: string };
  plan: RestorePlan | RestoreLayers;
}

/** A create's answer: the sandbox, and whether this call created it (false: an idempotent replay). */
export interface CreateAnswer {
  sandbox: Sandbox;
  created: boolean;
}
