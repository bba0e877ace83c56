// Time series drawn with uPlot (canvas); each chart also carries a text summary for screen readers.
import uPlot from "uplot";
import { h } from "../dom.js";

export interface Series {
  label: string;
  values: number[];
  color: string;
}

/** A line chart of `series` over `times` (ms since the epoch), `width` px wide. */
export function lineChart(title: string, times: number[], series: Series[], width: number): HTMLElement {
  const holder = h("div", { class: "chart-canvas", "aria-hidden": "true" });
  const peak = (s: Series) => Math.max(0, ...s.values);
  const figure = h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, title),
    holder,
    h("p", { class: "sr-only" }, series.map((s) => `${s.label}: peak ${peak(s)} over ${times.length} buckets`).join("; ")),
  );
  const opts: uPlot.Options = {
    width,
    height: 220,
    scales: { x: { time: true } },
    axes: [{ stroke: "#1f2933" }, { stroke: "#1f2933" }],
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: `${s.color}22` }))],
  };
  new uPlot(opts, [times.map((t) => t / 1000), ...series.map((s) => s.values)], holder);
  return figure;
}
