// The team's volumes: size, bytes used, who mounts them, age.
import type { Volume } from "@sandtree/protocol";
import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { age, bytes, labels } from "../format.js";

function row(v: Volume): HTMLElement {
  return h(
    "tr",
    {},
    h("td", {}, v.name),
    h("td", {}, v.id),
    h("td", {}, v.status),
    h("td", { class: "num" }, `${bytes(v.used_bytes)} of ${v.size_gb} GiB`),
    h("td", {}, v.mounted_by.join(", ") || "–"),
    h("td", {}, labels(v.labels)),
    h("td", {}, age(v.created_at)),
  );
}

export async function volumesView(root: HTMLElement): Promise<void> {
  replace(root, h("h1", {}, "Volumes"), h("p", {}, "Loading…"));
  const { volumes } = await api.volumes();
  const used = volumes.reduce((n, v) => n + v.used_bytes, 0);
  const head = ["Name", "ID", "Status", "Used", "Mounted by", "Labels", "Age"].map((t) => h("th", { scope: "col" }, t));
  replace(
    root,
    h("h1", {}, "Volumes"),
    h("p", { id: "volume-summary" }, `${volumes.length} volumes, ${bytes(used)} used`),
    volumes.length
      ? h("table", { id: "volumes" }, h("thead", {}, h("tr", {}, ...head)), h("tbody", {}, ...volumes.map(row)))
      : h("p", {}, "No volumes yet."),
  );
}
