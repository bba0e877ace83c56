import { PrimeEgressPolicy, type SandboxNetwork, UpdateNetworkRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { IdParams } from "./prime-sandbox-routes.js";

/**
 * sandtree's egress policy as Prime's `EgressPolicyStatus`: one list non-null (an empty denylist
 * allows everything, an empty allowlist denies it). sandtree applies a policy before it answers,
 * so a sandbox's policy is either applied or not yet in force (its VM not started).
 */
function policyView(n: SandboxNetwork) {
  const policy =
    n.mode === "allow_all"
      ? { allowlist: null, denylist: [] }
      : n.mode === "deny_all"
        ? { allowlist: [], denylist: null }
        : n.mode === "allowlist"
          ? { allowlist: n.network_allowlist, denylist: null }
          : { allowlist: null, denylist: n.network_denylist };
  return { policy, generation: 1, applied_generation: n.applied ? 1 : 0, applied: n.applied };
}

export function primeNetworkRoutes(app: FastifyInstance, s: Services): void {
  app.get("/api/v1/sandbox/:id/egress-policy", async (req) => {
    const { id } = parse(IdParams, req.params);
    await s.sandboxes.get(req.principal.teamId, id);
    return policyView(await (s.sandboxes.networkOf(id) ?? s.network).view(id));
  });

  app.put("/api/v1/sandbox/:id/egress-policy", async (req) => {
    const { id } = parse(IdParams, req.params);
    const body = parse(PrimeEgressPolicy, req.body ?? {});
    await s.sandboxes.running(req.principal.teamId, id);
    const update = body.allowlist != null ? { network_allowlist: body.allowlist } : { network_denylist: body.denylist ?? [] };
    return policyView(await (s.sandboxes.networkOf(id) ?? s.network).update(id, parse(UpdateNetworkRequest, update)));
  });
}
