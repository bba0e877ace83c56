import { type Accel, type HostCapacity, type HostState, type HostUsage, SandtreeError } from "@sandtree/protocol";

/** A host as placement sees it: its locality as sets, its last heartbeat in ms. */
export interface Candidate {
  id: string;
  name: string;
  state: HostState;
  capacity: HostCapacity;
  usage: HostUsage;
  lastHeartbeatMs: number;
  images: ReadonlySet<string>;
  templates: ReadonlySet<string>;
  layers: ReadonlySet<string>;
}

/** What is to be placed: its size, what it needs, and where its bytes are. */
export interface PlacementAsk {
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  /** "kvm" needs a KVM host; "tcg" runs anywhere. */
  accel?: Accel | undefined;
  image_digest?: string | undefined;
  template_key?: string | undefined;
  /** The checkpoint's layers (restore, fork). */
  layers?: readonly string[] | undefined;
  /** An admin's pin: this host or a refusal. */
  host?: string | undefined;
}

export interface PlacementClock {
  nowMs: number;
  /** A host whose last heartbeat is older than this many ms takes no work. */
  freshMs: number;
}

type Unfit = "not_active" | "stale" | "accel" | "full";

/** Why the host cannot take the ask, or null when it can. */
export function unfitReason(h: Candidate, ask: PlacementAsk, clock: PlacementClock): Unfit | null {
  if (h.state !== "ACTIVE") return "not_active";
  if (clock.nowMs - h.lastHeartbeatMs > clock.freshMs) return "stale";
  if (ask.accel === "kvm" && h.capacity.accel !== "kvm") return "accel";
  const c = h.capacity;
  const u = h.usage;
  if (u.vcpus + ask.vcpus > c.vcpus || u.memory_mib + ask.memory_mib > c.memory_mib || u.disk_gib + ask.disk_gib > c.disk_gib) {
    return "full";
  }
  return null;
}

interface Scored {
  host: Candidate;
  layers: number;
  template: number;
  image: number;
  free: number;
}

/** Spread: the share left of the host's scarcest resource once the ask is placed. */
function freeShare(h: Candidate, ask: PlacementAsk): number {
  const c = h.capacity;
  const u = h.usage;
  return Math.min(
    (c.vcpus - u.vcpus - ask.vcpus) / c.vcpus,
    (c.memory_mib - u.memory_mib - ask.memory_mib) / c.memory_mib,
    c.disk_gib > 0 ? (c.disk_gib - u.disk_gib - ask.disk_gib) / c.disk_gib : 1,
  );
}

/**
 * Best first: more of the checkpoint's layers, then the template, then the image, then more room,
 * then the name. On the parts, so a host that does not make the top can be dropped without
 * building anything for it (placement scans every host on every call).
 */
function compare(layers: number, template: number, image: number, free: number, name: string, b: Scored): number {
  return (
    b.layers - layers ||
    b.template - template ||
    b.image - image ||
    b.free - free ||
    (name < b.host.name ? -1 : name > b.host.name ? 1 : 0)
  );
}

const REASON_TEXT: Record<Unfit, string> = {
  not_active: "it is cordoned or lost",
  stale: "its heartbeat is late",
  accel: "it has no KVM",
  full: "it lacks free vCPUs, memory or disk",
};

/**
 * The hosts that can take `ask`, best first. Pure: the caller records the placement on the
 * first one the store accepts (the store re-checks the capacity). A pinned host is the only
 * candidate: unknown is HOST_NOT_FOUND, unfit is NO_CAPACITY; never another host.
 */
export function rankHosts(hosts: Iterable<Candidate>, ask: PlacementAsk, clock: PlacementClock, limit = Infinity): Candidate[] {
  if (ask.host !== undefined) {
    let pinned: Candidate | undefined;
    for (const h of hosts) if (h.name === ask.host) pinned = h;
    if (!pinned) throw new SandtreeError("HOST_NOT_FOUND", `no host named ${ask.host}`, { host: ask.host });
    const why = unfitReason(pinned, ask, clock);
    if (why) {
      throw new SandtreeError("NO_CAPACITY", `host ${ask.host} cannot take it: ${REASON_TEXT[why]}`, {
        host: ask.host,
        reason: why,
      });
    }
    return [pinned];
  }
  // The best `limit`, kept in order as the hosts go by (no sort of the whole fleet per call, and
  // nothing allocated for a host that does not enter the top).
  const best: Scored[] = [];
  const refused: Record<Unfit, number> = { not_active: 0, stale: 0, accel: 0, full: 0 };
  const askLayers = ask.layers ?? [];
  let total = 0;
  for (const h of hosts) {
    total++;
    const why = unfitReason(h, ask, clock);
    if (why) {
      refused[why]++;
      continue;
    }
    let layers = 0;
    for (const l of askLayers) if (h.layers.has(l)) layers++;
    const template = ask.template_key !== undefined && h.templates.has(ask.template_key) ? 1 : 0;
    const image = ask.image_digest !== undefined && h.images.has(ask.image_digest) ? 1 : 0;
    const free = freeShare(h, ask);
    if (best.length >= limit && compare(layers, template, image, free, h.name, best[best.length - 1] as Scored) >= 0) continue;
    let i = best.length;
    while (i > 0 && compare(layers, template, image, free, h.name, best[i - 1] as Scored) < 0) i--;
    best.splice(i, 0, { host: h, layers, template, image, free });
    if (best.length > limit) best.pop();
  }
  if (best.length === 0) {
    throw new SandtreeError(
      "NO_CAPACITY",
      `no host can take ${ask.vcpus} vCPUs, ${ask.memory_mib} MiB, ${ask.disk_gib} GiB${ask.accel === "kvm" ? " on KVM" : ""}: ${total} hosts, ${refused.full} full, ${refused.not_active} cordoned or lost, ${refused.stale} late, ${refused.accel} without KVM`,
      { hosts: total, ...refused },
    );
  }
  return best.map((s) => s.host);
}
