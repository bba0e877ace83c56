// The sandbox table: status, labels, age, resources, cost, start path; filtered by label and
// status on the server, one page at a time through the list's cursor (fast with 10,000 rows).
import type { Sandbox, SandboxStatus } from "@sandtree/protocol";
import { api } from "../api.js";
import { errorBox, h, labelled, replace, submitForm } from "../dom.js";
import { age, labels, usd } from "../format.js";

const PAGE = 50;
// Written here rather than imported: the protocol's values would bring zod into the bundle.
// The type check keeps it to real statuses.
const STATUSES: readonly SandboxStatus[] = ["PENDING", "PROVISIONING", "RUNNING", "PAUSED", "TERMINATED", "ERROR", "TIMEOUT"];

export function statusBadge(status: string): HTMLElement {
  return h("span", { class: `status status-${status.toLowerCase()}` }, status);
}

function row(s: Sandbox): HTMLElement {
  return h(
    "tr",
    { "data-id": s.id },
    h("td", {}, h("a", { href: `#/sandboxes/${encodeURIComponent(s.id)}` }, s.name ?? s.id)),
    h("td", {}, statusBadge(s.status)),
    h("td", {}, labels(s.labels)),
    h("td", {}, age(s.created_at, s.terminated_at)),
    h("td", {}, `${s.cpu_cores} vCPU, ${s.memory_gb} GiB, ${s.disk_size_gb} GiB disk`),
    h("td", { class: "num" }, usd(s.cost_usd)),
    h("td", {}, s.start_path ?? (s.source_checkpoint_id ? "fork" : "–")),
  );
}

export async function sandboxesView(root: HTMLElement): Promise<void> {
  const labelInput = h("input", { id: "filter-label", name: "label", placeholder: "team=ml, env=dev", autocomplete: "off" });
  const statusSelect = h(
    "select",
    { id: "filter-status", name: "status" },
    h("option", { value: "" }, "any"),
    ...STATUSES.map((s) => h("option", { value: s }, s)),
  );
  const body = h("tbody", {});
  const info = h("p", { id: "page-info", "aria-live": "polite" });
  const prev = h("button", { type: "button", id: "page-prev", disabled: true }, "Previous page");
  const next = h("button", { type: "button", id: "page-next", disabled: true }, "Next page");
  // Cursors of the pages seen so far: [undefined (first page), cursor of page 2, ...].
  let cursors: (string | undefined)[] = [undefined];
  let page = 0;

  async function load(): Promise<void> {
    const label = labelInput.value
      .split(",")
      .map((l) => l.trim())
      .filter(Boolean);
    info.textContent = "Loading…";
    try {
      const cursor = cursors[page];
      const list = await api.sandboxes({ status: statusSelect.value || undefined, label, limit: PAGE, cursor });
      replace(body, ...list.sandboxes.map(row));
      if (list.next_cursor) cursors[page + 1] = list.next_cursor;
      else cursors = cursors.slice(0, page + 1);
      prev.disabled = page === 0;
      next.disabled = !list.next_cursor;
      info.textContent = list.sandboxes.length
        ? `Page ${page + 1}: ${list.sandboxes.length} sandbox${list.sandboxes.length === 1 ? "" : "es"}${list.next_cursor ? ", more on the next page" : ""}`
        : "No sandboxes match.";
    } catch (err) {
      replace(body);
      replace(info, errorBox((err as Error).message));
    }
  }

  const form = submitForm(
    { class: "filters", "aria-label": "Filter sandboxes" },
    () => {
      cursors = [undefined];
      page = 0;
      return load();
    },
    ...labelled("Labels (key=value, comma-separated)", labelInput),
    ...labelled("Status", statusSelect),
    h("button", { type: "submit" }, "Filter"),
  );
  prev.addEventListener("click", () => {
    page = Math.max(0, page - 1);
    void load();
  });
  next.addEventListener("click", () => {
    page++;
    void load();
  });
  const headers = ["Sandbox", "Status", "Labels", "Age", "Resources", "Cost", "Start path"];
  replace(
    root,
    h("h1", {}, "Sandboxes"),
    form,
    h(
      "table",
      { id: "sandbox-table" },
      h("caption", { class: "sr-only" }, "Sandboxes, newest first"),
      h("thead", {}, h("tr", {}, ...headers.map((t) => h("th", { scope: "col" }, t)))),
      body,
    ),
    h("div", { class: "pager" }, prev, info, next),
  );
  await load();
}
