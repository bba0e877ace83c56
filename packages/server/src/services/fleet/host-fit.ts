import { type HostCapacity, type HostState, SandtreeError } from "@sandtree/protocol";

/** The size of a sandbox as placement counts it. */
export interface SizeAsk {
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
}

/** A host as the fit check sees it: its name and whole capacity (what it has empty, not what is free). */
export interface SizedHost {
  name: string;
  capacity: HostCapacity;
}

const gib = (mib: number) => `${Number((mib / 1024).toFixed(2))} GiB`;

/**
 * Refuses (422 EXCEEDS_HOST_CAPACITY) a sandbox that none of `hosts` could hold even with nothing
 * else on it: more vCPUs, memory or disk than the host has in all. A busy fleet is placement's
 * NO_CAPACITY (503, retry later); this is a request no retry can satisfy, so it is refused before
 * anything starts (a VM asking for more memory than its host has dies in its VMM). A host that reports
 * no disk (0) is not judged on disk. No hosts known: nothing to judge against, placement decides.
 */
export function checkFits(hosts: readonly SizedHost[], ask: SizeAsk): void {
  if (hosts.length === 0) return;
  const short = (h: SizedHost) => {
    const c = h.capacity;
    const out: string[] = [];
    if (ask.vcpus > c.vcpus) out.push("vcpus");
    if (ask.memory_mib > c.memory_mib) out.push("memory");
    if (c.disk_gib > 0 && ask.disk_gib > c.disk_gib) out.push("disk");
    return out;
  };
  let best: { host: SizedHost; short: string[] } | null = null;
  for (const h of hosts) {
    const s = short(h);
    if (s.length === 0) return;
    // The host to name: the one short of the fewest resources, then the one with the most memory.
    if (
      !best ||
      s.length < best.short.length ||
      (s.length === best.short.length && h.capacity.memory_mib > best.host.capacity.memory_mib)
    ) {
      best = { host: h, short: s };
    }
  }
  if (!best) return;
  const c = best.host.capacity;
  const asked: string[] = [];
  const has: string[] = [];
  if (best.short.includes("vcpus")) {
    asked.push(`${ask.vcpus} vCPUs`);
    has.push(`${c.vcpus} vCPUs`);
  }
  if (best.short.includes("memory")) {
    asked.push(`${gib(ask.memory_mib)} of memory`);
    has.push(`${gib(c.memory_mib)} of memory`);
  }
  if (best.short.includes("disk")) {
    asked.push(`${ask.disk_gib} GiB of disk`);
    has.push(`${c.disk_gib} GiB of free disk`);
  }
  const which = hosts.length === 1 ? `the only host, ${best.host.name},` : `the largest host, ${best.host.name},`;
  throw new SandtreeError("EXCEEDS_HOST_CAPACITY", `no host can hold ${asked.join(", ")}: ${which} has ${has.join(", ")}`, {
    asked: { vcpus: ask.vcpus, memory_mib: ask.memory_mib, disk_gib: ask.disk_gib },
    largest: { host: best.host.name, vcpus: c.vcpus, memory_mib: c.memory_mib, disk_gib: c.disk_gib },
    exceeds: best.short,
  });
}

/** checkFits over the hosts that are not LOST among those `eligible` takes. */
export function checkFitsAmong(
  hosts: Iterable<SizedHost & { id: string; state: HostState }>,
  ask: SizeAsk,
  eligible: (hostId: string) => boolean,
): void {
  checkFits(
    [...hosts].filter((h) => h.state !== "LOST" && eligible(h.id)),
    ask,
  );
}
