import { ListSandboxesQuery, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import { hostIdNamed, withHosts } from "../services/fleet/sandbox-hosts.js";
import { SANDBOX_ID_HEADER } from "../services/fleet/worker-headers.js";
import type { Services } from "../services/services.js";
import { CONTROL_PLANE_KEY_ID } from "../services/teams/auth-service.js";

const IdParams = z.object({ id: z.string().min(1).max(64) });
const SandboxIdHeader = z.string().regex(/^sb-[a-z2-7]{16}$/, "a sandbox id (sb- and 16 base32 letters)");

function parseLabels(raw: string | string[] | undefined): Record<string, string> | undefined {
  if (raw === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const item of Array.isArray(raw) ? raw : [raw]) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new SandtreeError("VALIDATION_FAILED", "label filters look like key=value", { field: "label" });
    if (!/^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/.test(item.slice(0, eq))) {
      throw new SandtreeError("VALIDATION_FAILED", `label filter ${JSON.stringify(item)}: invalid label key`, { field: "label" });
    }
    out[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return out;
}

export function sandboxRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes", async (req, reply) => {
    const body = req.body;
    if (body !== null && typeof body === "object" && "host" in body && !req.principal.isAdmin) {
      throw new SandtreeError("FORBIDDEN", "host (pinning a create to a fleet host) needs an admin key", { field: "host" });
    }
    // A fleet worker creates the sandbox its control plane placed here under the same id.
    const given = req.headers[SANDBOX_ID_HEADER];
    let id: string | undefined;
    if (given !== undefined) {
      if (req.principal.keyId !== CONTROL_PLANE_KEY_ID)
        throw new SandtreeError("FORBIDDEN", `${SANDBOX_ID_HEADER} is for a fleet worker's control plane only`);
      id = parse(SandboxIdHeader, given);
    }
    const { sandbox, created } = await s.restores.create(req.principal.teamId, body, id ? { id } : {});
    // 200: an idempotency_key replay answers the sandbox it created before.
    return reply.status(created ? 201 : 200).send(sandbox);
  });

  app.get("/v1/sandboxes", async (req) => {
    const q = parse(ListSandboxesQuery, req.query);
    const labels = parseLabels(q.label);
    if (q.host !== undefined && !req.principal.isAdmin) {
      throw new SandtreeError("FORBIDDEN", "host (sandboxes of one fleet host) needs an admin key", { field: "host" });
    }
    const hostId = q.host !== undefined ? await hostIdNamed(s.fleet, q.host) : undefined;
    const list = await s.sandboxes.list(req.principal.teamId, {
      limit: q.limit,
      ...(q.status ? { status: q.status } : {}),
      ...(labels ? { labels } : {}),
      ...(hostId !== undefined ? { hostId } : {}),
      ...(q.cursor ? { cursor: q.cursor } : {}),
    });
    // Where each runs is for operators: admin keys only.
    if (req.principal.isAdmin) await withHosts(s.fleet, list.sandboxes);
    return list;
  });

  app.get("/v1/sandboxes/:id", async (req) => {
    const { id } = parse(IdParams, req.params);
    const sb = await s.sandboxes.get(req.principal.teamId, id);
    return req.principal.isAdmin ? (await withHosts(s.fleet, [sb]))[0] : sb;
  });

  app.delete("/v1/sandboxes/:id", async (req) => {
    const { id } = parse(IdParams, req.params);
    return s.sandboxes.delete(req.principal.teamId, id);
  });

  app.get("/v1/sandboxes/:id/logs", async (req) => {
    const { id } = parse(IdParams, req.params);
    const { tail_bytes } = parse(
      z.object({
        tail_bytes: z.coerce
          .number()
          .int()
          .min(1)
          .max(16 * 1024 * 1024)
          .default(65_536),
      }),
      req.query,
    );
    return await s.sandboxes.logs(req.principal.teamId, id, tail_bytes);
  });
}
