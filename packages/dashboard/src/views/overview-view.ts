// Overview: the four cards (created in 24 h, estimated cost, running now, error rate) and the
// concurrency and creations charts, all from GET /v1/stats.
import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { count, percent, usd } from "../format.js";
import { lineChart } from "./charts.js";

function card(id: string, label: string, value: string): HTMLElement {
  return h(
    "div",
    { class: "card", role: "group", "aria-labelledby": `${id}-label` },
    h("p", { id: `${id}-label`, class: "card-label" }, label),
    h("p", { id, class: "card-value" }, value),
  );
}

export async function overviewView(root: HTMLElement): Promise<void> {
  replace(root, h("h1", {}, "Overview"), h("p", {}, "Loading…"));
  const stats = await api.stats(24, 30);
  const times = stats.series.map((b) => Date.parse(b.t));
  const width = Math.max(320, Math.min(root.clientWidth - 32, 1100));
  replace(
    root,
    h("h1", {}, "Overview"),
    h(
      "p",
      { class: "hint" },
      `Last 24 hours, ${new Date(stats.from).toLocaleString()} to ${new Date(stats.to).toLocaleString()}`,
    ),
    h(
      "section",
      { class: "cards", "aria-label": "Last 24 hours" },
      card("card-created", "Sandboxes created (24 h)", count(stats.created)),
      card("card-cost", "Estimated cost (24 h)", usd(stats.estimated_cost_usd)),
      card("card-running", "Running now", count(stats.running)),
      card("card-error-rate", "Error rate (24 h)", percent(stats.error_rate)),
    ),
    lineChart(
      "Concurrency (most running at once per 30 minutes)",
      times,
      [{ label: "running", values: stats.series.map((b) => b.running), color: "#1d4ed8" }],
      width,
    ),
    lineChart(
      "Creations per 30 minutes",
      times,
      [
        { label: "created", values: stats.series.map((b) => b.created), color: "#047857" },
        { label: "failed", values: stats.series.map((b) => b.failed), color: "#b91c1c" },
      ],
      width,
    ),
  );
}
