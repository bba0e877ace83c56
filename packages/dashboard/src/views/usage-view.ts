// Usage: the same report as `sandtree usage` (GET /v1/usage), with its numbers printed as the
// CLI prints them, grouped by day, hour, label, sandbox or team over a period; a CSV export.
import type { UsageAmounts } from "@sandtree/protocol";
import { api, type UsageParams } from "../api.js";
import { errorBox, h, labelled, replace, submitForm } from "../dom.js";
import { usageAmount, usageCost } from "../format.js";

const GROUPS = ["day", "hour", "label", "sandbox", "team"];

function cells(a: UsageAmounts): HTMLElement[] {
  return [
    h("td", { class: "num" }, usageAmount(a.vcpu_seconds)),
    h("td", { class: "num" }, usageAmount(a.memory_gib_seconds)),
    h("td", { class: "num" }, usageAmount(a.disk_gib_seconds)),
    h("td", { class: "num" }, usageAmount(a.checkpoint_gib_hours)),
    h("td", { class: "num" }, usageAmount(a.volume_gib_hours ?? 0)),
    h("td", { class: "num" }, usageCost(a.cost_usd)),
  ];
}

export async function usageView(root: HTMLElement): Promise<void> {
  const from = h("input", { id: "usage-from", name: "from", type: "date" });
  const to = h("input", { id: "usage-to", name: "to", type: "date" });
  const by = h("select", { id: "usage-by", name: "group_by" }, ...GROUPS.map((g) => h("option", { value: g }, g)));
  const labelKey = h("input", { id: "usage-label-key", name: "label_key", autocomplete: "off", placeholder: "app" });
  const result = h("div", { id: "usage-result", "aria-live": "polite" });
  const csv = h("button", { type: "button", id: "usage-csv" }, "Download CSV");

  function params(): UsageParams {
    return {
      group_by: by.value,
      ...(from.value ? { from: new Date(`${from.value}T00:00:00Z`).toISOString() } : {}),
      ...(to.value ? { to: new Date(Date.parse(`${to.value}T00:00:00Z`) + 86_400_000).toISOString() } : {}),
      ...(by.value === "label" && labelKey.value.trim() ? { label_key: labelKey.value.trim() } : {}),
    };
  }

  // The export goes through fetch (the key is a header), then to a file the browser saves.
  csv.addEventListener("click", async () => {
    try {
      const text = await api.usageCsv(params());
      const a = h("a", {
        href: URL.createObjectURL(new Blob([text], { type: "text/csv" })),
        download: `sandtree-usage-${by.value}.csv`,
      });
      a.click();
      URL.revokeObjectURL(a.href);
    } catch (err) {
      replace(result, errorBox((err as Error).message));
    }
  });

  async function load(): Promise<void> {
    replace(result, h("p", {}, "Loading…"));
    try {
      const r = await api.usage(params());
      const head = [
        "Key",
        "vCPU-seconds",
        "Memory GiB-seconds",
        "Disk GiB-seconds",
        "Checkpoint GiB-hours",
        "Volume GiB-hours",
        "Cost",
      ];
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

  const form = submitForm(
    { class: "filters", "aria-label": "Usage period" },
    load,
    ...labelled("From (UTC day)", from),
    ...labelled("To (UTC day, inclusive)", to),
    ...labelled("Group by", by),
    ...labelled("Label key (for lines by label)", labelKey),
    h("button", { type: "submit" }, "Show"),
    csv,
  );
  replace(root, h("h1", {}, "Usage"), form, result);
  await load();
}
