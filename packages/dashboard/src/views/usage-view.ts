// Usage: the same report as `sandtree usage` (GET /v1/usage), grouped by day, hour, label,
// sandbox or team over a period.
import type { UsageAmounts } from "@sandtree/protocol";
import { api } from "../api.js";
import { errorBox, h, replace } from "../dom.js";
import { usd } from "../format.js";

const GROUPS = ["day", "hour", "label", "sandbox", "team"];

function cells(a: UsageAmounts): HTMLElement[] {
  return [
    h("td", { class: "num" }, a.vcpu_seconds.toFixed(0)),
    h("td", { class: "num" }, a.memory_gib_seconds.toFixed(0)),
    h("td", { class: "num" }, a.disk_gib_seconds.toFixed(0)),
    h("td", { class: "num" }, a.checkpoint_gib_hours.toFixed(3)),
    h("td", { class: "num" }, usd(a.cost_usd)),
  ];
}

export async function usageView(root: HTMLElement): Promise<void> {
  const from = h("input", { id: "usage-from", name: "from", type: "date" });
  const to = h("input", { id: "usage-to", name: "to", type: "date" });
  const by = h("select", { id: "usage-by", name: "group_by" }, ...GROUPS.map((g) => h("option", { value: g }, g)));
  const result = h("div", { id: "usage-result", "aria-live": "polite" });

  async function load(): Promise<void> {
    replace(result, h("p", {}, "Loading…"));
    try {
      const r = await api.usage({
        group_by: by.value,
        ...(from.value ? { from: new Date(`${from.value}T00:00:00Z`).toISOString() } : {}),
        ...(to.value ? { to: new Date(Date.parse(`${to.value}T00:00:00Z`) + 86_400_000).toISOString() } : {}),
      });
      const head = ["Key", "vCPU-seconds", "Memory GiB-seconds", "Disk GiB-seconds", "Checkpoint GiB-hours", "Cost"];
      replace(
        result,
        h("p", {}, `${new Date(r.from).toLocaleString()} to ${new Date(r.to).toLocaleString()}, by ${r.group_by}, ${r.currency}`),
        h(
          "table",
          { id: "usage-table" },
          h("caption", { class: "sr-only" }, `Usage by ${r.group_by}`),
          h("thead", {}, h("tr", {}, ...head.map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, ...r.lines.map((l) => h("tr", {}, h("th", { scope: "row" }, l.key), ...cells(l)))),
          h("tfoot", {}, h("tr", { id: "usage-total" }, h("th", { scope: "row" }, "Total"), ...cells(r.total))),
        ),
      );
    } catch (err) {
      replace(result, errorBox((err as Error).message));
    }
  }

  const form = h(
    "form",
    { class: "filters", "aria-label": "Usage period" },
    h("label", { for: "usage-from" }, "From (UTC day)"),
    from,
    h("label", { for: "usage-to" }, "To (UTC day, inclusive)"),
    to,
    h("label", { for: "usage-by" }, "Group by"),
    by,
    h("button", { type: "submit" }, "Show"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void load();
  });
  replace(root, h("h1", {}, "Usage"), form, result);
  await load();
}
