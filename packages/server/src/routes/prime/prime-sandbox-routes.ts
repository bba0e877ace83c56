import {
  PrimeBulkDeleteRequest,
  PrimeCreateSandboxRequest,
  PrimeListQuery,
  PrimeSandboxIds,
  type Sandbox,
  SandboxStatus,
  SandtreeError,
  TERMINAL_STATUSES,
} from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { getEach } from "./prime-batch-get.js";
import { checkTeam, nativeCreateBody } from "./prime-create.js";
import { labelsFromPrime, sandboxView, statusView } from "./prime-views.js";

export const IdParams = z.object({ id: z.string().min(1).max(64) });
/** Where a Prime list walks to at most (its pages are cut from sandtree's cursor pages). */
const LIST_CAP = 100_000;

/** The sandbox with its egress lists (Prime's create answer and its `get` carry them). */
async function view(s: Services, sb: Sandbox) {
  const net = await (s.sandboxes.networkOf(sb.id) ?? s.network).view(sb.id).catch(() => null);
  const lists =
    net === null || !net.enabled
      ? undefined
      : {
          allowlist: net.mode === "allowlist" ? net.network_allowlist : net.mode === "deny_all" ? [] : null,
          denylist: net.mode === "denylist" ? net.network_denylist : net.mode === "allow_all" ? [] : null,
        };
  return sandboxView(sb, lists);
}

/** The gateway's base URL: this server, as the caller reached it, under /prime. */
export function gatewayUrl(req: FastifyRequest): string {
  return `${req.protocol}://${req.host}/prime/gateway`;
}

/** What `POST /sandbox/{id}/auth` answers: where the gateway is and a token for this sandbox there. */
function gatewayGrant(req: FastifyRequest, s: Services, id: string) {
  const { token, expiresAt } = s.gatewayTokens.issue(req.principal, id);
  return { gateway_url: gatewayUrl(req), user_ns: req.principal.teamId, job_id: id, token, expires_at: expiresAt.toISOString() };
}

async function listAll(s: Services, teamId: string, q: z.output<typeof PrimeListQuery>): Promise<Sandbox[]> {
  const status = q.status === undefined ? undefined : parse(SandboxStatus, q.status);
  const labels = q.labels === undefined ? undefined : labelsFromPrime(Array.isArray(q.labels) ? q.labels : [q.labels]);
  const active = q.is_active === "true" || q.is_active === "True";
  const out: Sandbox[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await s.sandboxes.list(teamId, {
      limit: 1000,
      ...(status ? { status } : {}),
      ...(labels ? { labels } : {}),
      ...(cursor ? { cursor } : {}),
    });
    out.push(...page.sandboxes.filter((sb) => !active || !TERMINAL_STATUSES.includes(sb.status)));
    if (page.next_cursor === null || out.length >= LIST_CAP) return out;
    cursor = page.next_cursor;
  }
}

/** The control plane of the Prime Sandboxes API (`{base}/api/v1/sandbox...`) on sandtree's services. */
export function primeSandboxRoutes(app: FastifyInstance, s: Services): void {
  app.post("/api/v1/sandbox", async (req, reply) => {
    const body = parse(PrimeCreateSandboxRequest, req.body);
    const { sandbox, created } = await s.restores.create(req.principal.teamId, nativeCreateBody(req.principal, body));
    // The client seeds its gateway auth from this, saving a POST /auth before its first command.
    const gatewayAuth = TERMINAL_STATUSES.includes(sandbox.status) ? {} : { gatewayAuth: gatewayGrant(req, s, sandbox.id) };
    return reply.status(created ? 201 : 200).send({ ...(await view(s, sandbox)), ...gatewayAuth });
  });

  app.get("/api/v1/sandbox", async (req) => {
    const q = parse(PrimeListQuery, req.query);
    checkTeam(req.principal, q.team_id);
    if (q.user_id !== undefined) {
      throw new SandtreeError("VALIDATION_FAILED", "user_id: sandtree keys belong to teams, not users", { field: "user_id" });
    }
    const all = await listAll(s, req.principal.teamId, q);
    const from = (q.page - 1) * q.per_page;
    const page = all.slice(from, from + q.per_page);
    return {
      sandboxes: await Promise.all(page.map((sb) => view(s, sb))),
      total: all.length,
      page: q.page,
      perPage: q.per_page,
      hasNext: from + q.per_page < all.length,
    };
  });

  app.get("/api/v1/sandbox/:id", async (req) => {
    const { id } = parse(IdParams, req.params);
    return view(s, await s.sandboxes.get(req.principal.teamId, id));
  });

  app.delete("/api/v1/sandbox/:id", async (req) => {
    const { id } = parse(IdParams, req.params);
    return view(s, await s.sandboxes.delete(req.principal.teamId, id));
  });

  app.delete("/api/v1/sandbox", async (req) => {
    const body = parse(PrimeBulkDeleteRequest, req.body ?? {});
    checkTeam(req.principal, body.team_id);
    if (body.user_id !== undefined || body.all_users) {
      throw new SandtreeError("VALIDATION_FAILED", "user_id, all_users: sandtree keys belong to teams, not users", {
        field: "user_id",
      });
    }
    if ((body.sandbox_ids === undefined) === (body.labels === undefined)) {
      throw new SandtreeError("VALIDATION_FAILED", "give exactly one of sandbox_ids or labels", { field: "sandbox_ids" });
    }
    // No labels would match every sandbox of the team: a delete of everything is never implied.
    if (body.labels?.length === 0) {
      throw new SandtreeError("VALIDATION_FAILED", "labels: give at least one label (an empty list would match every sandbox)", {
        field: "labels",
      });
    }
    const r = await s.bulk.delete(
      req.principal.teamId,
      body.sandbox_ids ? { ids: body.sandbox_ids } : { labels: labelsFromPrime(body.labels ?? []) },
    );
    return {
      succeeded: r.deleted,
      failed: r.not_found.map((id) => ({ sandbox_id: id, error: `sandbox ${id} not found` })),
      message: `deleted ${r.deleted.length} sandbox(es)${r.not_found.length ? `, ${r.not_found.length} not found` : ""}`,
    };
  });

  app.post("/api/v1/sandbox/status::batchGet", async (req) => {
    const { sandbox_ids } = parse(PrimeSandboxIds, req.body);
    const { found, missing } = await getEach(sandbox_ids, async (id) =>
      statusView(await s.sandboxes.get(req.principal.teamId, id)),
    );
    return {
      statuses: found,
      errors: missing.map(({ id }) => ({ sandbox_id: id, code: "NOT_FOUND", message: `sandbox ${id} not found` })),
    };
  });

  app.get("/api/v1/sandbox/:id/logs", async (req) => {
    const { id } = parse(IdParams, req.params);
    const l = await s.sandboxes.logs(req.principal.teamId, id, 65_536);
    const events = l.events.map((e) => `${e.at} ${e.message}`).join("\n");
    return { logs: `${l.console}${l.console && events ? "\n" : ""}${events}` };
  });

  app.get("/api/v1/sandbox/:id/error-context", async (req) => {
    const { id } = parse(IdParams, req.params);
    const v = statusView(await s.sandboxes.get(req.principal.teamId, id));
    return { status: v.status, errorType: v.error_type, errorMessage: v.error_message };
  });

  // Commands and files go through the gateway (prime-gateway-routes.ts) with this token.
  app.post("/api/v1/sandbox/:id/auth", async (req) => {
    const { id } = parse(IdParams, req.params);
    const sb = await s.sandboxes.get(req.principal.teamId, id);
    if (TERMINAL_STATUSES.includes(sb.status)) {
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} is ${sb.status}`, { id, status: sb.status });
    }
    return gatewayGrant(req, s, id);
  });
}
