/**
 * How `sandtree serve` writes its log: JSON lines (pino's, for collectors) or, on a terminal,
 * one readable line per event: `13:12:10.123 INFO  POST /v1/sandboxes 201 12ms`.
 */
export type LogFormat = "auto" | "pretty" | "json";

export function resolveLogFormat(format: LogFormat, isTty: boolean): "pretty" | "json" {
  return format === "auto" ? (isTty ? "pretty" : "json") : format;
}

const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields every pino line has, or that the request line shows in its own way. */
const SKIP = new Set(["level", "time", "pid", "hostname", "msg", "reqId", "req", "res", "responseTime"]);

function clock(ms: unknown): string {
  const d = new Date(typeof ms === "number" ? ms : Date.now());
  return d.toISOString().slice(11, 23);
}

function value(v: unknown): string {
  if (typeof v === "string") return /[\s"=]/.test(v) ? JSON.stringify(v) : v;
  return JSON.stringify(v);
}

/**
 * One pino JSON line as one readable line (null: a line not worth a line of its own).
 * `requests` carries each request's method and URL from its first line to its completion.
 */
export function prettyLine(line: string, requests: Map<string, string> = new Map()): string | null {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.trimEnd();
  }
  const level = (LEVELS[Number(o.level)] ?? String(o.level)).padEnd(5);
  const req = o.req as { method?: string; url?: string } | undefined;
  const res = o.res as { statusCode?: number } | undefined;
  const reqId = String(o.reqId ?? "");
  // Fastify logs each request twice (incoming, completed): one line, at its completion.
  if (o.msg === "incoming request") {
    if (reqId) requests.set(reqId, `${req?.method ?? ""} ${req?.url ?? ""}`);
    return null;
  }
  let text: string;
  if (o.msg === "request completed" && res) {
    const ms = typeof o.responseTime === "number" ? ` ${Math.round(o.responseTime)}ms` : "";
    const what = requests.get(reqId) ?? (req ? `${req.method ?? ""} ${req.url ?? ""}` : "");
    requests.delete(reqId);
    text = `${what} ${res.statusCode ?? ""}${ms}`.trim();
  } else {
    text = String(o.msg ?? "");
  }
  const extra = Object.entries(o)
    .filter(([k, v]) => !SKIP.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${value(k === "err" && typeof v === "object" && v ? ((v as { message?: string }).message ?? v) : v)}`);
  return `${clock(o.time)} ${level} ${text}${extra.length ? `  ${extra.join(" ")}` : ""}`;
}

/** A pino destination that writes readable lines to `out`. */
export function prettyLogStream(out: { write(s: string): unknown }): { write(line: string): void } {
  let partial = "";
  const requests = new Map<string, string>();
  return {
    write(chunk: string) {
      partial += chunk;
      let nl = partial.indexOf("\n");
      while (nl >= 0) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        nl = partial.indexOf("\n");
        const text = line.trim() ? prettyLine(line, requests) : null;
        if (text !== null) out.write(`${text}\n`);
      }
    },
  };
}
