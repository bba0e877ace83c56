import { Resolver } from "node:dns/promises";
import type net from "node:net";
import { classifyNetworkRule } from "@sandtree/protocol";
import { tunnelAddress } from "./addresses.js";
import { LOCAL_DNS_SUFFIX, nameMatches, type ResolverClient } from "./dns-resolver.js";
import type { DnsUpstream } from "./dns-upstream.js";
import type { SandboxNetSpec } from "./network-manager.js";

/**
 * Hostname rules of one sandbox's egress policy: what the DNS resolver may answer it, the
 * addresses its allowed names resolved to (kept while their TTL and a floor last), and the
 * addresses of its denylisted names as the host resolves them. The firewall's `resolved` list is
 * made from these.
 */

/** Addresses learned for hostname rules are kept at least this long (programs cache answers). */
const MIN_LEARNED_MS = 5 * 60_000;

/** A sandbox's network while it is live on this host. */
export interface Live {
  /** False: the sandbox's link is down, and the resolver does not answer it. */
  enabled: boolean;
  /** name -> HOST:PORT (SandboxNetworkSpec.tunnels). */
  tunnels: Record<string, string>;
  /** What the firewall holds for it; `spec.policy` is the policy in force. */
  spec: SandboxNetSpec;
  /** name -> address -> expiry (ms) */
  learned: Map<string, Map<string, number>>;
  /** Denylist hostnames' addresses as the host resolved them. */
  denied: Set<string>;
  proxies: net.Server[];
}

/** The addresses the firewall lets through (allowlist) or blocks (denylist) for hostname rules. */
export function resolvedOf(l: Live): string[] {
  if (l.spec.policy.mode === "denylist") return [...l.denied];
  if (l.spec.policy.mode !== "allowlist") return [];
  const now = Date.now();
  const out = new Set<string>();
  for (const addrs of l.learned.values()) for (const [a, exp] of addrs) if (exp > now) out.add(a);
  return [...out];
}

/** The resolver's client for one sandbox; `apply` puts a changed `resolvedOf` into its rules. */
export function resolverClient(l: Live, apply: () => Promise<void>): ResolverClient {
  return {
    decide: (name) => {
      const { mode, allow: allowlist, deny: denylist } = l.spec.policy;
      if (mode === "allow_all") return "allow";
      if (mode === "deny_all") return "deny";
      if (mode === "allowlist") return nameMatches(name, allowlist) ? "allow" : "deny";
      return nameMatches(name, denylist) ? "deny" : "allow";
    },
    learned: async (name, addresses, ttl) => {
      if (l.spec.policy.mode !== "allowlist" || addresses.length === 0) return;
      const key = name.toLowerCase().replace(/\.$/, "");
      const until = Date.now() + Math.max(ttl * 1000, MIN_LEARNED_MS);
      const known = new Set(resolvedOf(l));
      let m = l.learned.get(key);
      if (!m) l.learned.set(key, (m = new Map()));
      for (const a of addresses) m.set(a, Math.max(m.get(a) ?? 0, until));
      if (addresses.every((a) => known.has(a))) return;
      await apply();
    },
    local: (name) => {
      const label = name
        .toLowerCase()
        .replace(/\.$/, "")
        .slice(0, -(LOCAL_DNS_SUFFIX.length + 1));
      const k = Object.keys(l.tunnels).indexOf(label);
      return k >= 0 ? tunnelAddress(k) : null;
    },
  };
}

/** Drops learned addresses past their expiry; true when any went. */
export function expireLearned(l: Live, now: number): boolean {
  let changed = false;
  for (const [name, m] of l.learned) {
    for (const [a, exp] of m) if (exp <= now) changed = m.delete(a) || changed;
    if (m.size === 0) l.learned.delete(name);
  }
  return changed;
}

/**
 * Resolves the denylist's hostnames through the upstreams and adds their addresses; true when
 * that added any while the network is still `current` and still a denylist.
 */
export async function resolveDenied(l: Live, upstreams: readonly DnsUpstream[], current: () => boolean): Promise<boolean> {
  const hosts = l.spec.policy.deny.filter((r) => classifyNetworkRule(r) === "host");
  if (l.spec.policy.mode !== "denylist" || hosts.length === 0 || upstreams.length === 0) return false;
  const r = new Resolver({ timeout: 2000, tries: 1 });
  r.setServers(upstreams.map((u) => (u.port === 53 ? u.host : `${u.host}:${u.port}`)));
  const lists = await Promise.all(hosts.map((h) => r.resolve4(h).catch(() => [] as string[])));
  if (!current() || l.spec.policy.mode !== "denylist") return false;
  const before = l.denied.size;
  for (const a of lists.flat()) l.denied.add(a);
  return l.denied.size !== before;
}
