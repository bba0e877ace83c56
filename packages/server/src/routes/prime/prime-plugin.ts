import { SandtreeError } from "@sandtree/protocol";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { renderError } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { primeCheckpointRoutes } from "./prime-checkpoint-routes.js";
import { primeCommandSession } from "./prime-connect.js";
import { SandboxGoneError } from "./prime-gateway-auth.js";
import { primeGatewayRoutes } from "./prime-gateway-routes.js";
import { primeJobRoutes } from "./prime-job-routes.js";
import { primeNetworkRoutes } from "./prime-network-routes.js";
import { primeSandboxRoutes } from "./prime-sandbox-routes.js";

export const PRIME_PREFIX = "/prime";

/**
 * Errors as the Prime client reads them: `{"detail": ...}` (it raises `APIError("HTTP <status>:
 * <detail>")`, UnauthorizedError on 401, PaymentRequiredError on 402), with sandtree's code
 * beside it; a sandbox that ended answers the gateway's 410 `{"error": "sandbox_terminated"}`.
 */
function primeErrorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  const r = renderError(err, String(req.id), req.log);
  const gone = err instanceof SandboxGoneError;
  reply
    .header("x-request-id", r.body.request_id)
    .status(gone ? 410 : r.status)
    .send({ ...(gone ? { error: "sandbox_terminated" } : {}), detail: r.body.message, ...r.body });
}

/**
 * The Prime Sandboxes wire API (docs/prime.md) under /prime: `PRIME_API_BASE_URL=http://HOST:PORT/prime`.
 * Routes only: each translates onto sandtree's services, with its API keys (`PRIME_API_KEY`),
 * teams, quotas, budgets and metering; the gateway is this server too, behind a short-lived
 * token for one sandbox.
 */
export function primeRoutes(app: FastifyInstance, s: Services): void {
  app.register(
    async (prime) => {
      prime.setErrorHandler(primeErrorHandler);
      // The client sends `Content-Type: application/json` on every call, bodiless POSTs too.
      prime.removeContentTypeParser("application/json");
      prime.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
        if (body === "") return done(null, undefined);
        try {
          done(null, JSON.parse(body as string));
        } catch (err) {
          done(new SandtreeError("BAD_REQUEST", `the body is not JSON: ${(err as Error).message}`), undefined);
        }
      });
      prime.setNotFoundHandler((req, reply) =>
        primeErrorHandler(
          new SandtreeError(
            "ROUTE_NOT_FOUND",
            `sandtree does not serve Prime's ${req.method} ${req.url.split("?")[0]} (docs/prime.md)`,
          ),
          req,
          reply,
        ),
      );
      // The control plane takes a sandtree API key; the gateway checks its own token per route.
      prime.addHook("onRequest", async (req) => {
        if (req.url.startsWith(`${PRIME_PREFIX}/api/v1/`)) req.principal = await s.auth.authenticate(req.headers.authorization);
      });
      primeSandboxRoutes(prime, s);
      primeJobRoutes(prime, s);
      primeCheckpointRoutes(prime, s);
      primeNetworkRoutes(prime, s);
      primeGatewayRoutes(prime, s);
      primeCommandSession(prime, s);
    },
    { prefix: PRIME_PREFIX },
  );
}
