import { type Sandbox, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { notSupported } from "./e2b-errors.js";
import {
  egressPolicy,
  live,
  metadataFilter,
  NetworkUpdate,
  NewSandbox,
  sourceOf,
  started,
  toE2bDetail,
  toE2bSandbox,
} from "./e2b-mapping.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const ListQuery = z.strictObject({
  metadata: z.string().max(4096).optional(),
  state: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  nextToken: z.string().max(200).optional(),
  startedAfter: z.string().optional(),
  template: z.string().optional(),
  order: z.string().optional(),
});
const Timeout = z.strictObject({ timeout: z.number().int().min(0) });
const ConnectBody = z.strictObject({ timeout: z.number().int().min(1).optional(), memory: z.boolean().optional() });
const ForkBody = z.strictObject({
  timeout: z.number().int().min(1).optional(),
  count: z.number().int().min(1).max(100).optional(),
});

/** E2B's control plane (the `e2b` SDKs' `E2B_API_URL`), translated onto sandtree's services. */
export function e2bSandboxRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v2/sandboxes", async (req, reply) => {
    const b = parse(NewSandbox, req.body);
    const teamId = req.principal.teamId;
    if (b.autoPause) throw notSupported("autoPause (pausing on timeout: sandtree ends a sandbox at its timeout)");
    if (b.autoResume?.enabled) throw notSupported("autoResume");
    if (b.mcp != null) throw notSupported("mcp (the MCP gateway)");
    if (b.iam !== undefined) throw notSupported("iam tokens");
    const { sandbox } = await s.restores.create(teamId, {
      ...sourceOf(b.templateID),
      ...(b.timeout !== undefined ? { timeout_minutes: b.timeout / 60 } : {}),
      ...(b.metadata ? { labels: b.metadata } : {}),
      ...(b.envVars ? { environment_vars: b.envVars } : {}),
      ...egressPolicy(b.network, b.allow_internet_access),
      // Validated and refused (until they can be mounted) where every create's volumes are.
      ...(b.volumeMounts && b.volumeMounts.length > 0
        ? { volumes: b.volumeMounts.map((m) => ({ volume: m.name, path: m.path })) }
        : {}),
    });
    return reply.status(201).send(toE2bSandbox(s, await started(s, teamId, sandbox.id)));
  });

  app.get("/v2/sandboxes", async (req, reply) => {
    const q = parse(ListQuery, req.query);
    if (q.startedAfter || q.template || q.order) throw notSupported("listing by startedAfter, template or order");
    const states = new Set((q.state ?? "running,paused").split(","));
    for (const st of states) if (st !== "running" && st !== "paused") throw notSupported(`the sandbox state ${st}`);
    const status = states.size === 1 ? (states.has("paused") ? "PAUSED" : "RUNNING") : undefined;
    const labels = metadataFilter(q.metadata);
    const page = await s.sandboxes.list(req.principal.teamId, {
      limit: q.limit,
      ...(status ? { status } : {}),
      ...(labels ? { labels } : {}),
      ...(q.nextToken ? { cursor: q.nextToken } : {}),
    });
    const shown = (sb: Sandbox) => !TERMINAL_STATUSES.includes(sb.status) && (status !== undefined || sb.status !== "PENDING");
    if (page.next_cursor) reply.header("x-next-token", page.next_cursor);
    return page.sandboxes.filter(shown).map((sb) => toE2bDetail(sb));
  });

  app.post("/v2/sandboxes/:id/connect", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const b = parse(ConnectBody, req.body ?? {});
    const teamId = req.principal.teamId;
    if (b.memory === false) throw notSupported("resuming without memory (onResume: 'reboot')");
    let sb = live(await s.sandboxes.get(teamId, id));
    const resumed = sb.status === "PAUSED";
    if (resumed) sb = await s.sandboxes.resume(teamId, id);
    else if (sb.status !== "RUNNING") sb = await started(s, teamId, id);
    if (b.timeout !== undefined) await s.timeouts.setLifetime(teamId, id, b.timeout);
    return reply.status(resumed ? 201 : 200).send(toE2bSandbox(s, sb));
  });

  app.get("/sandboxes/:id", async (req) => {
    const { id } = parse(Params, req.params);
    const sb = live(await s.sandboxes.get(req.principal.teamId, id));
    return toE2bDetail(sb, s.sandboxTokens.tokenFor(sb.id));
  });

  app.delete("/sandboxes/:id", async (req, reply) => {
    const { id } = parse(Params, req.params);
    live(await s.sandboxes.get(req.principal.teamId, id));
    await s.sandboxes.delete(req.principal.teamId, id);
    return reply.status(204).send();
  });

  app.post("/sandboxes/:id/timeout", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { timeout } = parse(Timeout, req.body ?? {});
    live(await s.sandboxes.get(req.principal.teamId, id));
    await s.timeouts.setLifetime(req.principal.teamId, id, timeout);
    return reply.status(204).send();
  });

  // E2B's pause keeps memory; sandtree's stops the VM's CPUs with memory and disk kept on the
  // host, and connect (resume) continues every process where it was.
  app.post("/sandboxes/:id/pause", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const b = parse(z.strictObject({ memory: z.boolean().optional() }), req.body ?? {});
    if (b.memory === false) throw notSupported("a pause without memory (keepMemory: false)");
    const sb = live(await s.sandboxes.get(req.principal.teamId, id));
    if (sb.status === "PAUSED") throw new SandtreeError("CONFLICT", `sandbox ${id} is already paused`, { id });
    await s.sandboxes.pause(req.principal.teamId, id);
    return reply.status(204).send();
  });

  app.post("/sandboxes/:id/fork", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const b = parse(ForkBody, req.body ?? {});
    const teamId = req.principal.teamId;
    live(await s.sandboxes.get(teamId, id));
    const out = await s.restores.fork(teamId, id, {
      memory: true,
      count: b.count ?? 1,
      ...(b.timeout !== undefined ? { timeout_minutes: b.timeout / 60 } : {}),
    });
    const children = "sandboxes" in out ? out.sandboxes : [out.sandbox];
    const results = await Promise.all(
      children.map(async (c) => {
        try {
          return { sandbox: toE2bSandbox(s, await started(s, teamId, c.id)) };
        } catch (err) {
          const e = err instanceof SandtreeError ? err : new SandtreeError("INTERNAL", "the child did not start");
          return { error: { code: 500, message: `${e.code}: ${e.message}` } };
        }
      }),
    );
    return reply.status(201).send(results);
  });

  app.put("/sandboxes/:id/network", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const b = parse(NetworkUpdate, req.body ?? {});
    await s.sandboxes.running(req.principal.teamId, id);
    await (s.sandboxes.networkOf(id) ?? s.network).update(id, egressPolicy(b, b.allow_internet_access));
    return reply.status(204).send();
  });

  app.get("/sandboxes/:id/metrics", async () => {
    throw notSupported("per-sandbox CPU, memory and disk samples (GET /v1/usage has the metered vCPU, memory and disk)");
  });
}
