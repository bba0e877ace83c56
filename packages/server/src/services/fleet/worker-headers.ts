/** The header that gives a create on a worker the control plane's sandbox id (honored only for the control plane's key). */
export const SANDBOX_ID_HEADER = "x-sandtree-sandbox-id";

/** The header that gives a checkpoint on a worker the control plane's checkpoint id (the control plane's key only). */
export const CHECKPOINT_ID_HEADER = "x-sandtree-checkpoint-id";
