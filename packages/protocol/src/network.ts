import { z } from "zod";

/**
 * One egress rule: a hostname (`pypi.org`), a wildcard (`*.example.com`: any name below
 * example.com, not example.com itself), an IPv4 address or an IPv4 CIDR. Hostname rules are
 * enforced from what the sandbox's own resolver answered, so they follow address changes.
 */
const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export type NetworkRuleKind = "host" | "wildcard" | "ip" | "cidr";

/** Classifies a normalised rule, or null when it is not one. */
export function classifyNetworkRule(rule: string): NetworkRuleKind | null {
  if (IPV4.test(rule)) return "ip";
  const cidr = /^([^/]+)\/(\d{1,2})$/.exec(rule);
  if (cidr?.[1] && IPV4.test(cidr[1]) && Number(cidr[2]) <= 32) return "cidr";
  if (rule.startsWith("*.") && HOSTNAME.test(rule.slice(2)) && rule.slice(2).includes(".")) return "wildcard";
  if (HOSTNAME.test(rule) && !/^[\d.]+$/.test(rule)) return "host";
  return null;
}

export const NetworkRule = z
  .string()
  .min(1)
  .max(256)
  .transform((s) => s.trim().toLowerCase().replace(/\.$/, ""))
  .refine((s) => classifyNetworkRule(s) !== null, {
    message: "a rule is a hostname, '*.domain', an IPv4 address or an IPv4 CIDR (IPv6 is not routed to sandboxes)",
  });

export const NetworkRuleList = z.array(NetworkRule).max(256, "at most 256 rules");

/** Tunnel names become `<name>.sandtree.internal` inside the sandbox. */
export const TunnelName = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/, "tunnel names are 1-32 of a-z, 0-9, '-'");

/** `HOST:PORT` the server can reach (a name or IPv4 address). */
export const TunnelTarget = z
  .string()
  .max(300)
  .regex(/^[A-Za-z0-9.-]{1,253}:\d{1,5}$/, "a tunnel target is HOST:PORT")
  .refine((s) => {
    const port = Number(s.slice(s.lastIndexOf(":") + 1));
    return port >= 1 && port <= 65535;
  }, "port must be 1-65535");

export const Tunnels = z.record(TunnelName, TunnelTarget).refine((r) => Object.keys(r).length <= 16, "at most 16 tunnels");

export const NETWORK_MODES = ["allow_all", "deny_all", "allowlist", "denylist"] as const;
export const NetworkMode = z.enum(NETWORK_MODES);
export type NetworkMode = z.infer<typeof NetworkMode>;

/** PUT /v1/sandboxes/{id}/network: one list, or neither for the server's default policy. */
export const UpdateNetworkRequest = z
  .strictObject({
    network_allowlist: NetworkRuleList.optional(),
    network_denylist: NetworkRuleList.optional(),
  })
  .refine((b) => !(b.network_allowlist && b.network_denylist), {
    message: "network_allowlist and network_denylist are mutually exclusive",
    path: ["network_denylist"],
  });
export type UpdateNetworkRequest = z.input<typeof UpdateNetworkRequest>;

export const TunnelInfo = z.object({
  name: z.string(),
  /** What the sandbox connects to: `<name>.sandtree.internal`. */
  hostname: z.string(),
  target: z.string(),
});

export const SandboxNetwork = z.object({
  sandbox_id: z.string(),
  /** False for a sandbox created with `network: false` (no interface at all). */
  enabled: z.boolean(),
  /** The sandbox's IPv4 address (null until its interface exists). */
  address: z.string().nullable(),
  gateway: z.string().nullable(),
  mode: NetworkMode,
  network_allowlist: z.array(z.string()),
  network_denylist: z.array(z.string()),
  tunnels: z.array(TunnelInfo),
  /** True once the policy shown is what the host enforces. */
  applied: z.boolean(),
  updated_at: z.string(),
});
export type SandboxNetwork = z.infer<typeof SandboxNetwork>;

/** POST /v1/sandboxes/{id}/ports */
export const ExposePortRequest = z.strictObject({
  port: z.number().int().min(1).max(65535),
});
export type ExposePortRequest = z.input<typeof ExposePortRequest>;

export const ExposedPort = z.object({
  sandbox_id: z.string(),
  port: z.number().int(),
  /** HTTP (and WebSocket) to the sandbox's port: `<server>/ports/<id>/<port>/...`. */
  url: z.string(),
  /** Raw TCP carried over a WebSocket (`sandtree sandbox port-forward`). */
  tcp_url: z.string(),
  /** Shown once, when exposed (exposing again rotates it); send as `X-Sandtree-Token` or `?sandtree_token=`. */
  token: z.string().optional(),
  created_at: z.string(),
});
export type ExposedPort = z.infer<typeof ExposedPort>;

export const ExposedPortList = z.object({ ports: z.array(ExposedPort) });
export type ExposedPortList = z.infer<typeof ExposedPortList>;
