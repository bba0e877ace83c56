import { timingSafeEqual } from "node:crypto";
import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import type { Services } from "../services/services.js";

/** POST routes that create a sandbox (their error answers count as create failures). */
const CREATES = new Set(["/v1/sandboxes", "/v1/sandboxes/:id/fork"]);

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * GET /metrics (Prometheus text). Its numbers cover every team, so it needs an admin API key,
 * or the metrics token of the configuration (SANDTREE_METRICS_TOKEN) as a bearer token: a
 * scraper then holds no key that can change anything.
 */
export function metricsRoutes(app: FastifyInstance, s: Services, opts: { metricsToken?: string | undefined }): void {
  app.get("/metrics", async (req, reply) => {
    const header = req.headers.authorization;
    const bearer = header ? /^Bearer\s+(\S+)$/i.exec(header)?.[1] : undefined;
    if (!(opts.metricsToken && bearer && sameToken(bearer, opts.metricsToken))) {
      const p = await s.auth.authenticate(header);
      if (!p.isAdmin) throw new SandtreeError("FORBIDDEN", "GET /metrics needs an admin key or the metrics token");
    }
    return reply.header("content-type", s.metrics.contentType).send(await s.metrics.text());
  });

  app.addHook("onResponse", async (req, reply) => {
    if (req.method !== "POST") return;
    const route = req.routeOptions.url ?? "";
    if (route === "/v1/sandboxes/:id/exec") s.metrics.exec(reply.statusCode < 400, reply.elapsedTime / 1000);
  });
  // A create's error answer: counted by its code.
  app.addHook("onSend", async (req, reply, payload) => {
    if (req.method !== "POST" || reply.statusCode < 400 || !CREATES.has(req.routeOptions.url ?? "")) return payload;
    let code = "INTERNAL";
    try {
      code = (JSON.parse(String(payload)) as { code?: string }).code ?? code;
    } catch {}
    s.metrics.createFailed(code);
    return payload;
  });
}
