// Checkpoints drawn as the tree they form (parent_id), each node with its state, stored bytes
// and cost; the sandbox it was taken from links to that sandbox's page.
import type { Checkpoint } from "@sandtree/protocol";
import { h } from "../dom.js";
import { bytes, usd } from "../format.js";

function node(c: Checkpoint, children: Map<string | null, Checkpoint[]>, level: number): HTMLElement {
  const kids = children.get(c.id) ?? [];
  return h(
    "li",
    {
      role: "treeitem",
      "aria-level": level,
      "aria-expanded": kids.length ? "true" : null,
      "data-checkpoint": c.id,
      tabindex: level === 1 ? 0 : -1,
    },
    h(
      "div",
      { class: "node" },
      h("code", {}, c.id),
      h("span", { class: `state state-${c.state.toLowerCase()}` }, c.state),
      h("span", {}, `${bytes(c.stored_bytes)} stored`),
      h("span", {}, usd(c.cost_usd)),
      c.has_memory ? h("span", { class: "tag" }, "memory") : null,
      h("span", {}, "from ", h("a", { href: `#/sandboxes/${encodeURIComponent(c.sandbox_id)}` }, c.sandbox_id)),
    ),
    kids.length ? h("ul", { role: "group" }, ...kids.map((k) => node(k, children, level + 1))) : null,
  );
}

/** The forest of `checkpoints`: roots are those whose parent is not in the list. */
export function checkpointTree(checkpoints: Checkpoint[], label: string): HTMLElement {
  const ids = new Set(checkpoints.map((c) => c.id));
  const children = new Map<string | null, Checkpoint[]>();
  for (const c of [...checkpoints].sort((a, b) => a.created_at.localeCompare(b.created_at))) {
    const parent = c.parent_id && ids.has(c.parent_id) ? c.parent_id : null;
    children.set(parent, [...(children.get(parent) ?? []), c]);
  }
  const tree = h(
    "ul",
    { role: "tree", class: "tree", "aria-label": label },
    ...(children.get(null) ?? []).map((c) => node(c, children, 1)),
  );
  tree.addEventListener("keydown", (ev) => moveFocus(tree, ev));
  return tree;
}

/** Up/Down move between nodes, as a tree widget does; Enter follows the node's sandbox link. */
function moveFocus(tree: HTMLElement, ev: KeyboardEvent): void {
  const items = [...tree.querySelectorAll<HTMLElement>("[role=treeitem]")];
  const i = items.indexOf(document.activeElement as HTMLElement);
  if (i < 0) return;
  const to = ev.key === "ArrowDown" ? items[i + 1] : ev.key === "ArrowUp" ? items[i - 1] : undefined;
  if (ev.key === "Enter") items[i]?.querySelector("a")?.click();
  if (!to) return;
  ev.preventDefault();
  items[i]?.setAttribute("tabindex", "-1");
  to.setAttribute("tabindex", "0");
  to.focus();
}
