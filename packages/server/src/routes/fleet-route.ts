// Where a call into a sandbox that runs on a fleet worker is answered, said by the route itself
// (the fleet proxy, worker-proxy.ts, holds no list of routes).

declare module "fastify" {
  interface FastifyContextConfig {
    fleet?: FleetRoute;
  }
}

/**
 * - absent: on the sandbox's host (the worker), forwarded there as it came;
 * - `answered-here`: by this control plane, from its record and its services, which go to the
 *   sandbox's site themselves (Placement.siteOf, CheckpointSites.of: a checkpoint taken there, a
 *   pause, a reset or a deletion done there);
 * - `port-urls`: on the worker, its answer's port URLs re-rendered on this control plane's address;
 * - `way-in`: a port's way in, guarded by the port's token: forwarded to the worker's same path.
 */
export type FleetRoute = "answered-here" | "port-urls" | "way-in";

/** Route options of a call answered by this control plane for a sandbox on a worker. */
export const ANSWERED_HERE = { config: { fleet: "answered-here" } } as const;
/** Route options of a port's management call (forwarded, URLs rewritten). */
export const PORT_URLS = { config: { fleet: "port-urls" } } as const;
/** Route options of a port's way in. */
export const WAY_IN = { config: { fleet: "way-in" } } as const;
