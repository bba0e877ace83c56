// Every checkpoint of the team, as a tree.
import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { bytes, usd } from "../format.js";
import { checkpointTree } from "./checkpoint-tree.js";

export async function checkpointsView(root: HTMLElement): Promise<void> {
  replace(root, h("h1", {}, "Checkpoints"), h("p", {}, "Loading…"));
  const { checkpoints } = await api.checkpoints();
  const stored = checkpoints.reduce((n, c) => n + c.stored_bytes, 0);
  const cost = checkpoints.reduce((n, c) => n + (c.cost_usd ?? 0), 0);
  replace(
    root,
    h("h1", {}, "Checkpoints"),
    h("p", { id: "checkpoint-summary" }, `${checkpoints.length} checkpoints, ${bytes(stored)} stored, ${usd(cost)} so far`),
    checkpoints.length ? checkpointTree(checkpoints, "Checkpoint tree") : h("p", {}, "No checkpoints yet."),
  );
}
