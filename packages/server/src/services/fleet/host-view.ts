import type { Host } from "@sandtree/protocol";
import type { HostRow } from "../../store/host-store.js";
import type { Candidate } from "./placement.js";

/** A host as admins see it: never its secret hash, its locality as counts. */
export function hostView(h: HostRow, url: string | null = null): Host {
  return {
    id: h.id,
    name: h.name,
    state: h.state,
    cordoned: h.cordoned,
    capacity: h.capacity,
    usage: h.usage,
    locality: { images: h.locality.images.length, templates: h.locality.templates.length, layers: h.locality.layers.length },
    registered_at: h.registered_at,
    last_heartbeat_at: h.last_heartbeat_at,
    url,
  };
}

/** A host as placement sees it. */
export function candidateOf(h: HostRow): Candidate & { secret_hash: string } {
  return {
    id: h.id,
    name: h.name,
    state: h.state,
    capacity: h.capacity,
    usage: { ...h.usage },
    lastHeartbeatMs: Date.parse(h.last_heartbeat_at),
    images: new Set(h.locality.images),
    templates: new Set(h.locality.templates),
    layers: new Set(h.locality.layers),
    secret_hash: h.secret_hash,
  };
}
