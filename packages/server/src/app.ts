import { SandtreeError } from "@sandtree/protocol";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { errorHandler, newRequestId, notFoundHandler } from "./errors.js";
import { openApiDocument, type RegisteredRoute } from "./openapi.js";
import { activityHook } from "./routes/activity-hook.js";
import { bulkRoutes } from "./routes/bulk-routes.js";
import { checkpointRoutes } from "./routes/checkpoint-routes.js";
import { costHook } from "./routes/cost-hook.js";
import { dashboardRoutes } from "./routes/dashboard-routes.js";
import { desktopRoutes } from "./routes/desktop-routes.js";
import { desktopVncRoutes } from "./routes/desktop-vnc-routes.js";
import { E2B_PREFIX, e2bRoutes } from "./routes/e2b/e2b-routes.js";
import { execOutputRoutes } from "./routes/exec-output-routes.js";
import { execRoutes } from "./routes/exec-routes.js";
import { fileRoutes } from "./routes/file-routes.js";
import { fleetCheckpointRoutes } from "./routes/fleet-checkpoint-routes.js";
import { fleetRoutes, WORKER_ROUTE_PREFIX } from "./routes/fleet-routes.js";
import { imageRoutes } from "./routes/image-routes.js";
import { jobRoutes } from "./routes/job-routes.js";
import { metricsRoutes } from "./routes/metrics-routes.js";
import { networkRoutes } from "./routes/network-routes.js";
import { pauseRoutes } from "./routes/pause-routes.js";
import { portRoutes, withoutToken } from "./routes/port-routes.js";
import { primeRoutes } from "./routes/prime/prime-plugin.js";
import { ptyRoutes } from "./routes/pty-routes.js";
import { sandboxRoutes } from "./routes/sandbox-routes.js";
import { teamRoutes } from "./routes/team-routes.js";
import { dropUnreadBodies } from "./routes/unread-bodies.js";
import { usageRoutes } from "./routes/usage-routes.js";
import { versionRoutes } from "./routes/version-routes.js";
import { volumeRoutes } from "./routes/volume-routes.js";
import type { Services } from "./services/services.js";
import type { Principal } from "./services/teams/auth-service.js";
import { VERSION } from "./version.js";

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyInstance {
    /** The E2B API's routes ("METHOD URL"), documented in docs/e2b.md rather than the OpenAPI document. */
    e2bRoutes: string[];
  }
}

export { VERSION };

/** GET routes that read from the guest (every other method on a sandbox may touch its VM). */
const READS_FROM_THE_VM = new Set([
  "/v1/sandboxes/:id/files",
  "/v1/sandboxes/:id/files/stat",
  "/v1/sandboxes/:id/files/list",
  "/v1/sandboxes/:id/pty",
  "/v1/sandboxes/:id/jobs/:jobId/output",
  "/v1/sandboxes/:id/desktop",
  "/v1/sandboxes/:id/desktop/events",
  "/v1/sandboxes/:id/desktop/screenshots/:sha256",
  "/v1/sandboxes/:id/desktop/vnc",
]);

/** Fastify's request log fields, with port tokens (`?sandtree_token=`) kept out of the URL. */
function serializeRequest(req: FastifyRequest) {
  return {
    method: req.method,
    url: withoutToken(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket ? req.socket.remotePort : undefined,
  };
}

function loggerOptions(logger: boolean | object | undefined): false | object {
  if (!logger) return false;
  const base = logger === true ? {} : (logger as { serializers?: object });
  return { ...base, serializers: { ...base.serializers, req: serializeRequest } };
}

/** The HTTP app over the services; tests drive it with `app.inject()` or a real listener. */
export function buildApp(
  services: Services,
  opts: { logger?: boolean | object; metricsToken?: string | undefined } = {},
): FastifyInstance {
  const bodyLimit = 1024 * 1024;
  const app = Fastify({
    logger: loggerOptions(opts.logger),
    bodyLimit,
    genReqId: newRequestId,
  });
  app.decorateRequest("principal", null as unknown as Principal);
  // File uploads and stdin are streamed through, never buffered.
  app.addContentTypeParser("application/octet-stream", (_req, payload, done) => done(null, payload));
  app.addContentTypeParser("*", (_req, payload, done) => done(null, payload));
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  dropUnreadBodies(app, bodyLimit);

  // The web dashboard's static pages (registered before the hook below: they are not the API).
  dashboardRoutes(app);
  // The OpenAPI document lists every route registered, as registered.
  const routes: RegisteredRoute[] = [];
  const e2b: string[] = [];
  app.decorate("e2bRoutes", e2b);
  app.addHook("onRoute", (r) => {
    if (r.url.startsWith(`${E2B_PREFIX}/`)) {
      for (const m of [r.method].flat()) if (m !== "HEAD") e2b.push(`${m} ${r.url}`);
    } else routes.push({ method: r.method, url: r.url });
  });
  let openApi: object | null = null;
  app.get("/healthz", async () => ({ ok: true, version: VERSION }));
  app.get("/v1/openapi.json", async () => (openApi ??= openApiDocument(routes)));
  versionRoutes(app);
  app.addHook("onRequest", async (req) => {
    const url = req.url.split("?")[0] ?? "";
    if (!url.startsWith("/v1/") || url === "/v1/openapi.json" || url === "/v1/version") return;
    // Workers hold no API key: their routes check the join token or the host's secret.
    if (url.startsWith(WORKER_ROUTE_PREFIX)) return;
    req.principal = await services.auth.authenticate(req.headers.authorization);
  });

  // After a restart, a call into a sandbox whose VM is still being reconnected waits for that
  // (bounded by the adoption's deadline), then runs on what it found: the VM, or 409 when the
  // sandbox became ERROR. Reads of records (the sandbox, its logs, checkpoints, jobs) never wait.
  app.addHook("preHandler", async (req) => {
    const id = (req.params as { id?: unknown } | undefined)?.id;
    const route = req.routeOptions.url ?? "";
    if (typeof id !== "string" || !route.startsWith("/v1/sandboxes/:id")) return;
    if (req.method === "GET" && !READS_FROM_THE_VM.has(route)) return;
    await services.sandboxes.whenAdopted(id);
  });
  activityHook(app, services);
  costHook(app, services);
  sandboxRoutes(app, services);
  bulkRoutes(app, services);
  checkpointRoutes(app, services);
  pauseRoutes(app, services);
  networkRoutes(app, services);
  execRoutes(app, services);
  execOutputRoutes(app, services);
  jobRoutes(app, services);
  ptyRoutes(app, services);
  portRoutes(app, services);
  fileRoutes(app, services);
  volumeRoutes(app, services);
  desktopRoutes(app, services);
  desktopVncRoutes(app, services);
  imageRoutes(app, services);
  teamRoutes(app, services);
  usageRoutes(app, services);
  metricsRoutes(app, services, { metricsToken: opts.metricsToken });
  fleetRoutes(app, services);
  fleetCheckpointRoutes(app, services);
  // The Prime Sandboxes wire API, on the same services (docs/prime.md).
  primeRoutes(app, services);
  // E2B's API under /e2b: the `e2b` SDKs' E2B_API_URL and E2B_SANDBOX_URL (docs/e2b.md).
  e2bRoutes(app, services);
  return app;
}

export { SandtreeError };
