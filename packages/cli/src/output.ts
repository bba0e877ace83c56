import type { Writable } from "node:stream";

export type OutputFormat = "table" | "json";

export function printJson(out: Writable, value: unknown): void {
  out.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A command's answer: `value` as JSON with `-o json`, else the `text` it prints for people. */
export function printResult(out: Writable, format: OutputFormat | undefined, value: unknown, text: string): void {
  if (format === "json") printJson(out, value);
  else out.write(text);
}

/** A plain, left-aligned table: a header row, two spaces between columns, no trailing blanks. */
export function renderTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const clean = (s: string) => s.replace(/[\r\n\t]/g, " ");
  const all = [headers.map(clean), ...rows.map((r) => headers.map((_, i) => clean(r[i] ?? "")))];
  const widths = headers.map((_, i) => Math.max(...all.map((r) => width(r[i] ?? ""))));
  return all
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell + " ".repeat((widths[i] ?? 0) - width(cell))))
        .join("  ")
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

/** Key/value lines for a single object (`get` without -o json). */
export function renderFields(fields: ReadonlyArray<readonly [string, string]>): string {
  const w = Math.max(0, ...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${`${k}:`.padEnd(w + 2)}${v}\n`).join("");
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** "42s", "5m", "3h", "2d": how long ago an ISO timestamp was. */
export function formatAge(iso: string | null, now = Date.now()): string {
  if (!iso) return "-";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

export function formatLabels(labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  return parts.length > 0 ? parts.join(",") : "-";
}

/** Display width, counting each code point once (good enough for ids, names and image refs). */
function width(s: string): number {
  return [...s].length;
}
