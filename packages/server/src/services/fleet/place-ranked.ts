import { type Placement, type PlacementRequest, SandtreeError } from "@sandtree/protocol";
import type { z } from "zod";
import type { HostStore } from "../../store/host-store.js";
import type { HostCache } from "./host-cache.js";
import { type Candidate, rankHosts } from "./placement.js";

/** Hosts tried, best first, before a placement the store keeps refusing gives up. */
const MAX_TRIES = 5;

export interface PlaceRankedArgs {
  hosts: HostStore;
  cache: HostCache;
  nowMs: number;
  /** A host silent this long takes no new work. */
  freshMs: number;
  /** Recorded on the placement when this process starts the sandbox there. */
  placedBy?: string;
}

/**
 * Ranks the eligible hosts and records the placement on the first the store accepts: the store
 * re-checks the capacity in one conditional update, so several control planes never overcommit.
 */
export async function placeRanked(
  a: PlaceRankedArgs,
  req: z.output<typeof PlacementRequest>,
  eligible?: (hostId: string) => boolean,
): Promise<Placement> {
  const rank = (all: Map<string, Candidate>) => {
    const view = eligible ? new Map([...all].filter(([id]) => eligible(id))) : all;
    return rankHosts(view.values(), req, { nowMs: a.nowMs, freshMs: a.freshMs }, MAX_TRIES);
  };
  let ranked: Candidate[];
  try {
    ranked = rank(await a.cache.view());
  } catch (err) {
    // The view may be up to a second old: a host that looked full or late may have room or have
    // beaten since (a sandbox just ended). Refused only on what the store says now: of the
    // pinned host alone when there is one (a host it no longer has: all of them, as unpinned).
    if (!(err instanceof SandtreeError) || err.code !== "NO_CAPACITY") throw err;
    const pinned = req.host !== undefined ? await a.cache.viewWithHost(req.host) : null;
    ranked = rank(pinned ?? (await a.cache.view(0)));
  }
  const placedAt = new Date(a.nowMs).toISOString();
  const freshSince = new Date(a.nowMs - a.freshMs).toISOString();
  for (const h of ranked) {
    const row = {
      sandbox_id: req.sandbox_id,
      host_id: h.id,
      vcpus: req.vcpus,
      memory_mib: req.memory_mib,
      disk_gib: req.disk_gib,
      placed_at: placedAt,
    };
    const placedBy = a.placedBy ? { placedBy: a.placedBy } : {};
    if (await a.hosts.place(row, { freshSince, ...placedBy })) {
      h.usage.vcpus += req.vcpus;
      h.usage.memory_mib += req.memory_mib;
      h.usage.disk_gib += req.disk_gib;
      h.usage.placements++;
      return { ...row, host: h.name };
    }
    if (await a.hosts.getPlacement(req.sandbox_id)) {
      throw new SandtreeError("ALREADY_EXISTS", `sandbox ${req.sandbox_id} is already placed`, { sandbox_id: req.sandbox_id });
    }
    const fresh = await a.hosts.getHost(h.id);
    if (fresh) a.cache.remember(fresh);
  }
  throw new SandtreeError("NO_CAPACITY", `the hosts that fit were taken meanwhile (${ranked.length} tried): retry`, {
    ...(req.host ? { host: req.host } : {}),
    tried: ranked.length,
  });
}
