// Exposed ports of sandboxes on workers, as the control plane serves them: the worker renders
// `url`/`tcp_url` on its own address, the control plane re-renders them on the address its
// caller reached it at; the ways in (`/ports/...`, `/tcp/...`) carry the port's token through.
import type { Sandbox } from "@sandtree/protocol";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { Services } from "../services/services.js";
import { portUrls, TOKEN_HEADER, withoutToken } from "./port-routes.js";

const Rendered = z.object({ sandbox_id: z.string(), port: z.number().int() }).passthrough();
const List = z.object({ ports: z.array(Rendered) }).passthrough();

/**
 * The worker's answer with every port's URLs on this control plane's address. A body that is not
 * an ExposedPort or a list of them (an error) goes back as the worker sent it.
 */
export function rewritePortUrls(req: FastifyRequest, body: Buffer): Buffer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return body;
  }
  const fix = (p: z.infer<typeof Rendered>) => ({ ...p, ...portUrls(req, p.sandbox_id, p.port) });
  const list = List.safeParse(parsed);
  if (list.success) return Buffer.from(JSON.stringify({ ...list.data, ports: list.data.ports.map(fix) }));
  const one = Rendered.safeParse(parsed);
  return one.success ? Buffer.from(JSON.stringify(fix(one.data))) : body;
}

/**
 * What a way in sends the worker as its Authorization: nothing for a token (the worker checks it
 * against its own exposed ports), or, for a `/tcp` tunnel opened with an API key and no token,
 * the host's call key once this control plane checked the key and that the sandbox is its team's.
 */
export async function wayInAuth(req: FastifyRequest, s: Services, id: string, hostKey: string): Promise<string | null> {
  const route = req.routeOptions.url ?? "";
  const header = req.headers[TOKEN_HEADER];
  const hasToken = (typeof header === "string" && header !== "") || withoutToken(req.url) !== req.url;
  if (route !== "/tcp/:id/:port" || hasToken || req.headers.authorization === undefined) return null;
  const principal = await s.auth.authenticate(req.headers.authorization);
  await s.sandboxes.get(principal.teamId, id); // 404 for another team's sandbox
  return `Bearer ${hostKey}`;
}

// The worker's refusals of a way in (PORT_TOKEN_INVALID, PORT_NOT_FOUND, SANDBOX_NOT_RUNNING or
// NETWORK_DISABLED): not activity. A guest's own 401, 404 or 409 is not counted either.
const REFUSED = new Set([401, 404, 409]);

/**
 * Idle timeouts on this control plane (whose reaper ends sandboxes on workers too): a way in the
 * worker let through keeps the sandbox active while the exchange lasts, as on a single server.
 */
export function countsAsActivity(s: Services, sb: Sandbox): (status: number, conn: NodeJS.EventEmitter) => void {
  return (status, conn) => {
    if (REFUSED.has(status)) return;
    const end = s.timeouts.beginSoon(sb.team_id, sb.id);
    conn.once("close", end);
  };
}
