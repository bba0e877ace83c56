import type { FastifyInstance } from "fastify";
import type { Services } from "../services/services.js";

// Every Sandbox and Checkpoint the API answers carries `cost_usd` (so far), and every Sandbox its
// `volumes`, added here, in one place, for single objects (also a fork's `{sandbox}`) and for
// lists (`sandboxes`, `checkpoints`), in one query per answer.

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isSandbox = (v: Obj) => typeof v.id === "string" && v.id.startsWith("sb-") && "cpu_cores" in v && "status" in v;
const isCheckpoint = (v: Obj) => typeof v.id === "string" && v.id.startsWith("ck-") && "stored_bytes" in v && "state" in v;

function collect(payload: unknown): { sandboxes: Obj[]; checkpoints: Obj[] } {
  const sandboxes: Obj[] = [];
  const checkpoints: Obj[] = [];
  const visit = (v: unknown) => {
    if (!isObj(v)) return;
    if (isSandbox(v)) sandboxes.push(v);
    else if (isCheckpoint(v)) checkpoints.push(v);
  };
  visit(isObj(payload) && isObj(payload.sandbox) && !isSandbox(payload) ? payload.sandbox : payload);
  if (isObj(payload)) {
    for (const field of ["sandboxes", "checkpoints", "results", "items"]) {
      const list = payload[field];
      if (Array.isArray(list)) for (const item of list) visit(isObj(item) && isObj(item.sandbox) ? item.sandbox : item);
    }
  }
  return { sandboxes, checkpoints };
}

export function costHook(app: FastifyInstance, s: Services): void {
  app.addHook("preSerialization", async (req, _reply, payload) => {
    if (!(req.url.startsWith("/v1/sandboxes") || req.url.startsWith("/v1/checkpoints"))) return payload;
    const { sandboxes, checkpoints } = collect(payload);
    if (sandboxes.length > 0) {
      const costs = await s.metering.costsOf(
        "sandbox",
        sandboxes.map((x) => x.id as string),
      );
      for (const x of sandboxes) x.cost_usd = costs.get(x.id as string) ?? 0;
      const volumes = await s.volumes.sandboxVolumes(sandboxes.map((x) => x.id as string));
      for (const x of sandboxes) x.volumes = volumes.get(x.id as string) ?? [];
    }
    if (checkpoints.length > 0) {
      const costs = await s.metering.costsOf(
        "checkpoint",
        checkpoints.map((x) => x.id as string),
      );
      for (const x of checkpoints) x.cost_usd = costs.get(x.id as string) ?? 0;
    }
    return payload;
  });
}
