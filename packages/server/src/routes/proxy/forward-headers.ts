import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from "node:http";

// Hop-by-hop headers (RFC 9110 7.6.1): never forwarded, either way. Every proxy of this server
// (a sandbox's ports, a fleet worker's calls) goes through this one list.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** Header names the Connection header lists: hop-by-hop too. */
function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const c = headers.connection;
  return new Set(
    (Array.isArray(c) ? c.join(",") : (c ?? ""))
      .split(",")
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== ""),
  );
}

export interface ForwardOptions {
  /** End-to-end headers the upstream must not see either (a port's token, the caller's key). */
  drop?: (name: string) => boolean;
  /** Replaces a header's value (undefined: the header is left out). */
  rewrite?: (name: string, value: string | string[]) => string | string[] | undefined;
  /** The `Host` the upstream gets. */
  host?: string;
  /** Adds X-Forwarded-For/Host/Proto for the client (the upstream is a sandbox's guest). */
  forwardedProto?: string;
  /** Set last (an Authorization the upstream takes instead of the caller's). */
  set?: OutgoingHttpHeaders;
}

/** What the upstream gets: the client's end-to-end headers, as the options change them. */
export function forwardHeaders(req: IncomingMessage, o: ForwardOptions = {}): OutgoingHttpHeaders {
  const incoming = req.headers;
  const listed = connectionListed(incoming);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name) || name === "host" || o.drop?.(name)) continue;
    if (o.forwardedProto !== undefined && name.startsWith("x-forwarded-")) continue;
    const kept = o.rewrite ? o.rewrite(name, value) : value;
    if (kept !== undefined) out[name] = kept;
  }
  // A chunked body stays chunked (Node would not chunk a GET's or DELETE's body by itself).
  if (String(incoming["transfer-encoding"] ?? "").includes("chunked")) out["transfer-encoding"] = "chunked";
  if (o.host !== undefined) out.host = o.host;
  if (o.forwardedProto !== undefined) {
    const prior = incoming["x-forwarded-for"];
    const client = req.socket.remoteAddress ?? "";
    out["x-forwarded-for"] = prior ? `${Array.isArray(prior) ? prior.join(", ") : prior}, ${client}` : client;
    out["x-forwarded-host"] = incoming.host ?? "";
    out["x-forwarded-proto"] = o.forwardedProto;
  }
  return { ...out, ...o.set };
}

/** The upstream's answer headers minus hop-by-hop ones (Node frames the body itself). */
export function answerHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionListed(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  return out;
}
