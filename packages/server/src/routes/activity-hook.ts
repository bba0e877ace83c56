import type { FastifyInstance } from "fastify";
import type { Services } from "../services/services.js";

// Requests that use a sandbox (idle timeouts): commands, transfers and file reads, starting
// jobs and reading their output. Status reads (the sandbox, its logs, a job's state) are not.
const ACTIVITY = new Set([
  "POST /v1/sandboxes/:id/exec",
  "POST /v1/sandboxes/:id/execs/:execId/signal",
  "POST /v1/sandboxes/:id/execs/:execId/stdin",
  "GET /v1/sandboxes/:id/pty",
  "GET /v1/sandboxes/:id/execs/:execId/output",
  "GET /v1/sandboxes/:id/files",
  "PUT /v1/sandboxes/:id/files",
  "DELETE /v1/sandboxes/:id/files",
  "GET /v1/sandboxes/:id/files/stat",
  "GET /v1/sandboxes/:id/files/list",
  "POST /v1/sandboxes/:id/files/mkdir",
  "POST /v1/sandboxes/:id/jobs",
  "GET /v1/sandboxes/:id/jobs/:jobId/output",
  "POST /v1/sandboxes/:id/jobs/:jobId/kill",
  "POST /v1/sandboxes/:id/desktop/actions",
  "POST /v1/sandboxes/:id/desktop/replay",
  "GET /v1/sandboxes/:id/desktop/events",
  "GET /v1/sandboxes/:id/desktop/screenshots/:sha256",
]);

/** Marks the sandbox active for as long as such a request runs (a long exec is not idleness). */
export function activityHook(app: FastifyInstance, s: Services): void {
  app.addHook("onRequest", async (req, reply) => {
    if (!ACTIVITY.has(`${req.method} ${req.routeOptions.url}`)) return;
    const id = (req.params as { id?: unknown }).id;
    if (typeof id !== "string" || !req.principal) return;
    const end = await s.timeouts.begin(req.principal.teamId, id);
    reply.raw.once("close", end);
  });
}
