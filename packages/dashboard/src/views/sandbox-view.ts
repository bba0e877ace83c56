// One sandbox: its details, console log and events (GET /logs), a box that runs a command
// through the exec API and shows its output, and the tree of its checkpoints.
import type { Sandbox } from "@sandtree/protocol";
import { api } from "../api.js";
import { errorBox, h, labelled, replace, submitForm } from "../dom.js";
import { age, labels, usd } from "../format.js";
import { checkpointTree } from "./checkpoint-tree.js";
import { statusBadge } from "./sandboxes-view.js";

function details(s: Sandbox): HTMLElement {
  const rows: [string, string | HTMLElement][] = [
    ["Status", statusBadge(s.status)],
    ["Image", s.image],
    ["Labels", labels(s.labels) || "–"],
    ["Resources", `${s.cpu_cores} vCPU, ${s.memory_gb} GiB memory, ${s.disk_size_gb} GiB disk`],
    ["Age", age(s.created_at, s.terminated_at)],
    ["Cost so far", usd(s.cost_usd)],
    ["Start path", s.start_path ?? "–"],
    // Admin keys only: the fleet host that runs it (none once it ended).
    ...(s.host !== undefined ? [["Host", s.host ?? "–"] as [string, string]] : []),
    ["Created", new Date(s.created_at).toLocaleString()],
  ];
  if (s.error_reason) rows.push(["Error", s.error_code ? `${s.error_code}: ${s.error_reason}` : s.error_reason]);
  return h("dl", { class: "details" }, ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function execBox(id: string): HTMLElement {
  const input = h("input", { id: "exec-command", name: "command", autocomplete: "off", placeholder: "uname -a" });
  const output = h("div", { id: "exec-output", "aria-live": "polite" });
  return submitForm(
    { class: "exec", "aria-labelledby": "exec-title" },
    async () => {
      if (!input.value.trim()) return;
      replace(output, h("p", {}, "Running…"));
      try {
        const r = await api.exec(id, input.value);
        replace(
          output,
          h("p", { id: "exec-exit" }, `exit code ${r.exit_code}${r.timed_out ? " (timed out)" : ""}, ${r.duration_ms} ms`),
          h("h3", {}, "stdout"),
          h("pre", { id: "exec-stdout", tabindex: 0 }, r.stdout),
          r.stderr ? h("h3", {}, "stderr") : null,
          r.stderr ? h("pre", { id: "exec-stderr", tabindex: 0 }, r.stderr) : null,
        );
      } catch (err) {
        replace(output, errorBox((err as Error).message));
      }
    },
    h("h2", { id: "exec-title" }, "Run a command"),
    ...labelled("Command (runs under /bin/sh -c)", input),
    h("button", { type: "submit" }, "Run"),
    output,
  );
}

export async function sandboxView(root: HTMLElement, id: string): Promise<void> {
  replace(root, h("h1", {}, id), h("p", {}, "Loading…"));
  const [s, logs, cps] = await Promise.all([api.sandbox(id), api.logs(id), api.checkpoints()]);
  const mine = cps.checkpoints.filter((c) => c.sandbox_id === id);
  replace(
    root,
    h("p", {}, h("a", { href: "#/sandboxes" }, "← All sandboxes")),
    h("h1", {}, s.name ? `${s.name} (${s.id})` : s.id),
    details(s),
    s.status === "RUNNING" ? execBox(id) : h("p", {}, `Commands run only while the sandbox is RUNNING (it is ${s.status}).`),
    // Every sandbox gets the link: the viewer says so when it has no display (409 NO_DISPLAY).
    s.status === "RUNNING"
      ? h("p", {}, h("a", { id: "desktop-link", href: `#/sandboxes/${encodeURIComponent(id)}/desktop` }, "Desktop (live view)"))
      : null,
    h("h2", {}, "Checkpoints"),
    mine.length ? checkpointTree(mine, `Checkpoints of ${id}`) : h("p", {}, "No checkpoints."),
    h("h2", {}, "Events"),
    h(
      "ol",
      { id: "events", class: "events" },
      ...logs.events.map((e) => h("li", {}, h("time", { datetime: e.at }, new Date(e.at).toLocaleTimeString()), " ", e.message)),
    ),
    h("h2", {}, "Console log", logs.console_truncated ? " (last part)" : ""),
    h("pre", { id: "console-log", class: "console", tabindex: 0, "aria-label": "Console log" }, logs.console || "(empty)"),
  );
}
