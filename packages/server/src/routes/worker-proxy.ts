import { TERMINAL_STATUSES } from "@sandtree/protocol";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { RemoteHost } from "../services/fleet/host-names.js";
import { unreachable } from "../services/fleet/worker-client.js";
import type { Services } from "../services/services.js";
import { forwardHeaders } from "./proxy/forward-headers.js";
import { at, forward, proxyUpgrade, relay, type Upstream } from "./proxy/reverse-proxy.js";
import { upgrades } from "./upgrades.js";
import { countsAsActivity, rewritePortUrls, wayInAuth } from "./worker-ports.js";

/**
 * The worker as the proxy's upstream: the caller's headers, the caller's key dropped (the worker
 * gets the host's call key instead, or, on a port's way in, none: see wayInAuth).
 */
function worker(req: FastifyRequest, host: RemoteHost, auth: string | null): Upstream {
  const headers = forwardHeaders(req.raw, {
    drop: (name) => name === "authorization",
    // Browsers send the key as a WebSocket subprotocol (`bearer.<key>`): never forwarded.
    rewrite(name, value) {
      if (name !== "sec-websocket-protocol" || typeof value !== "string") return value;
      const kept = value
        .split(",")
        .map((p) => p.trim())
        .filter((p) => !p.startsWith("bearer."));
      return kept.length > 0 ? kept.join(", ") : undefined;
    },
    set: auth === null ? {} : { authorization: auth },
  });
  return at(host.url, { path: req.url, headers, failure: (err) => unreachable(host, err.message) });
}

/**
 * Fleet mode: every call into a sandbox that runs on a worker goes to that worker, with the
 * host's call key instead of the caller's API key, after this control plane checked the key and
 * that the sandbox is the caller's team's (and counted its activity). Runs as an onRequest hook
 * after authentication, before any body is read, so uploads, downloads and exec output stream.
 */
export function workerProxy(app: FastifyInstance, s: Services): void {
  const remote = s.remote;
  const pending = upgrades(app);
  app.addHook("onRequest", async (req, reply) => {
    const route = req.routeOptions.url ?? "";
    const fleet = req.routeOptions.config.fleet;
    if (fleet === "way-in") return wayIn(req, reply);
    if (fleet === "answered-here") return;
    if (!route.startsWith("/v1/sandboxes/:id") || !req.principal) return;
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== "string") return;
    // Another team's sandbox (or none): the route answers 404 as for any sandbox.
    const sb = await s.sandboxes.get(req.principal.teamId, id).catch(() => null);
    if (!sb) return;
    // An ended sandbox (deleted, ended on its worker, or lost with its host) is answered here
    // from this control plane's record: its worker may be gone.
    if ((TERMINAL_STATUSES as readonly string[]).includes(sb.status)) return;
    const host = await remote.hostOf(id);
    if (!host) return;
    const to = worker(req, host, `Bearer ${host.key}`);
    if (req.headers.upgrade && pending.get(req.raw)) return proxyUpgrade(req, reply, pending, to);
    // Exposed ports: the worker renders their URLs on its address; the caller gets this one's.
    const rewrite = fleet === "port-urls" ? (body: Buffer) => rewritePortUrls(req, body) : undefined;
    return relay(reply, await forward(req.raw, to), { rewrite });
  });

  /** `/ports/{id}/{port}/...` and `/tcp/{id}/{port}` of a live sandbox on a worker: piped to the worker's same path. */
  async function wayIn(req: FastifyRequest, reply: FastifyReply) {
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== "string") return;
    // Only a live sandbox of this store is looked up (an unknown id is answered by the route: 404).
    const sb = await s.ports.live(id);
    if (!sb) return;
    const host = await remote.hostOf(id);
    if (!host) return;
    const to = worker(req, host, await wayInAuth(req, s, id, host.key));
    const answered = countsAsActivity(s, sb);
    if (req.headers.upgrade && pending.get(req.raw)) return proxyUpgrade(req, reply, pending, to, { answered });
    const answer = await forward(req.raw, to);
    answered(answer.statusCode ?? 502, reply.raw);
    return relay(reply, answer);
  }
}
