import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { mountConnect } from "../../connect/engine.js";
import { Filesystem } from "../../gen/filesystem/filesystem_pb.js";
import { Process } from "../../gen/process/process_pb.js";
import type { Services } from "../../services/services.js";
import { authenticateApiKey } from "./e2b-auth.js";
import { e2bErrorHandler } from "./e2b-errors.js";
import { e2bSandboxRoutes } from "./e2b-sandbox-routes.js";
import { e2bSnapshotRoutes } from "./e2b-snapshot-routes.js";
import { ENVD_CALLER, envdCaller } from "./envd-context.js";
import { envdFileRoutes } from "./envd-file-routes.js";
import { filesystemService } from "./envd-filesystem.js";
import { processService } from "./envd-process.js";

/** Where E2B's API lives: E2B_API_URL and E2B_SANDBOX_URL are both http://HOST:PORT/e2b. */
export const E2B_PREFIX = "/e2b";

/** The daemon's routes (no API key: the sandbox's access token); the rest is the control plane. */
const DAEMON_ROUTES = new Set([`${E2B_PREFIX}/files`, `${E2B_PREFIX}/health`]);

/**
 * E2B's control plane and in-sandbox daemon protocol, so code written for the `e2b` SDKs runs
 * on sandtree by setting E2B_API_URL and E2B_SANDBOX_URL. Routes only translate onto the
 * services (docs/e2b.md has the mapping); errors take E2B's `{code, message}` shape. Returns the
 * Connect RPC URLs mounted (for the documentation check).
 */
export function e2bRoutes(app: FastifyInstance, s: Services): string[] {
  app.register(
    async (scope) => {
      scope.setErrorHandler(e2bErrorHandler);
      scope.setNotFoundHandler((req, reply) => {
        void reply
          .status(404)
          .send({ code: 404, message: `ROUTE_NOT_FOUND: ${req.method} ${req.url} is not an E2B route sandtree serves` });
      });
      scope.addHook("onRequest", async (req) => {
        if (DAEMON_ROUTES.has(req.routeOptions.url ?? "")) return;
        if (!req.routeOptions.url) throw new SandtreeError("ROUTE_NOT_FOUND", `${req.method} ${req.url} is not an E2B route`);
        await authenticateApiKey(req, s);
      });
      e2bSandboxRoutes(scope, s);
      e2bSnapshotRoutes(scope, s);
      envdFileRoutes(scope, s);
    },
    { prefix: E2B_PREFIX },
  );
  return mountConnect(app, ENVD_CALLER, {
    prefix: E2B_PREFIX,
    services: [Process, Filesystem],
    routes(router) {
      router.service(Process, processService(s));
      router.service(Filesystem, filesystemService(s));
    },
    context: (req) => envdCaller(req, s),
  });
}
