import { type Sandbox, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import { z } from "zod";
import type { Services } from "../../services/services.js";
import { notSupported } from "./e2b-errors.js";

/**
 * The daemon version reported to the SDKs, which switch features on by it: 0.5.7 enables
 * closeStdin (0.5.2) and octet-stream uploads (0.5.7); file metadata (0.6.2), entries in watch
 * events (0.6.3) and network mounts (0.6.4) stay off, refused by the SDK itself.
 */
export const ENVD_VERSION = "0.5.7";
/** What `endAt` says of a sandbox without a lifetime limit (E2B's always have one). */
const NO_END = "9999-12-31T23:59:59.000Z";
const CHECKPOINT_ID = /^ck-[0-9a-f]{20}$/;

const Metadata = z.record(z.string(), z.string());
const NetworkBody = z.strictObject({
  allowOut: z.array(z.string()).optional(),
  denyOut: z.array(z.string()).optional(),
  egressProxy: z.unknown().optional(),
  rules: z.unknown().optional(),
  allowPublicTraffic: z.boolean().optional(),
  maskRequestHost: z.string().optional(),
  httpsPorts: z.array(z.number()).optional(),
});
type NetworkBody = z.infer<typeof NetworkBody>;

export const NewSandbox = z.strictObject({
  templateID: z.string().min(1).max(512),
  timeout: z.number().int().min(1).optional(),
  metadata: Metadata.optional(),
  envVars: z.record(z.string(), z.string()).optional(),
  secure: z.boolean().optional(),
  allow_internet_access: z.boolean().optional(),
  network: NetworkBody.optional(),
  autoPause: z.boolean().optional(),
  autoPauseMemory: z.boolean().optional(),
  autoResume: z.object({ enabled: z.boolean() }).optional(),
  mcp: z.unknown().optional(),
  iam: z.unknown().optional(),
  volumeMounts: z.array(z.object({ name: z.string(), path: z.string() })).optional(),
});

export const NetworkUpdate = NetworkBody.extend({ allow_internet_access: z.boolean().optional() });

/** E2B's egress settings as sandtree's policy (one list, or neither for the server default). */
export function egressPolicy(
  n: NetworkBody | undefined,
  allowInternet: boolean | undefined,
): { network_allowlist?: string[]; network_denylist?: string[] } {
  if (n?.rules !== undefined) throw notSupported("network.rules (request transforms)");
  if (n?.egressProxy != null) throw notSupported("network.egressProxy");
  if (n?.maskRequestHost !== undefined) throw notSupported("network.maskRequestHost");
  if (n?.allowPublicTraffic !== undefined) throw notSupported("network.allowPublicTraffic (sandtree exposes ports one by one)");
  if (n?.httpsPorts !== undefined) throw notSupported("network.httpsPorts");
  const allow = n?.allowOut ?? [];
  const deny = n?.denyOut ?? [];
  const denyAll = allowInternet === false || deny.includes("0.0.0.0/0");
  // E2B's allowOut wins over denyOut: with everything denied it is an allowlist.
  if (denyAll) return { network_allowlist: allow };
  if (deny.length > 0 && allow.length > 0)
    throw notSupported("allowOut together with a partial denyOut (sandtree keeps one list: an allowlist or a denylist)");
  if (deny.length > 0) return { network_denylist: deny };
  return {};
}

/** A template ID: a checkpoint ID (a snapshot) starts from it, with its memory; anything else is an image. */
export function sourceOf(templateID: string): { checkpoint_id: string; restore_memory: true } | { image: string } {
  return CHECKPOINT_ID.test(templateID) ? { checkpoint_id: templateID, restore_memory: true } : { image: templateID };
}

/** A sandbox that ended is gone for E2B (404), as a killed one is there. */
export function live(sb: Sandbox): Sandbox {
  if (TERMINAL_STATUSES.includes(sb.status))
    throw new SandtreeError("SANDBOX_NOT_FOUND", `sandbox ${sb.id} is ${sb.status}`, { id: sb.id });
  return sb;
}

/** Waits until a sandbox just created here runs; its failure is the call's. */
export async function started(s: Services, teamId: string, id: string): Promise<Sandbox> {
  await s.starts.settled(id);
  const sb = await s.sandboxes.get(teamId, id);
  if (sb.status !== "RUNNING") {
    throw new SandtreeError(
      sb.status === "ERROR" ? "VM_START_FAILED" : "SANDBOX_NOT_RUNNING",
      sb.error_reason ?? `sandbox ${id} is ${sb.status}`,
      {
        id,
        status: sb.status,
      },
    );
  }
  return sb;
}

/** E2B's `Sandbox` (what create, connect and fork answer). */
export function toE2bSandbox(s: Services, sb: Sandbox) {
  return {
    sandboxID: sb.id,
    templateID: sb.source_checkpoint_id ?? sb.image,
    clientID: "sandtree",
    envdVersion: ENVD_VERSION,
    envdAccessToken: s.sandboxTokens.tokenFor(sb.id),
    domain: null,
    ...(sb.name ? { alias: sb.name } : {}),
  };
}

/** E2B's `ListedSandbox` / `SandboxDetail`. */
export function toE2bDetail(sb: Sandbox, withToken?: string) {
  return {
    sandboxID: sb.id,
    templateID: sb.source_checkpoint_id ?? sb.image,
    clientID: "sandtree",
    ...(sb.name ? { alias: sb.name } : {}),
    cpuCount: sb.cpu_cores,
    memoryMB: Math.round(sb.memory_gb * 1024),
    diskSizeMB: sb.disk_size_gb * 1024,
    envdVersion: ENVD_VERSION,
    metadata: sb.labels,
    startedAt: sb.started_at ?? sb.created_at,
    endAt: sb.expires_at ?? NO_END,
    state: sb.status === "PAUSED" ? "paused" : "running",
    volumeMounts: [],
    ...(withToken ? { envdAccessToken: withToken } : {}),
  };
}

/** E2B's `metadata` filter: `k=v&k2=v2`, each key and value URI-encoded once more. */
export function metadataFilter(raw: string | undefined): Record<string, string> | undefined {
  if (!raw) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(raw)) out[decodeURIComponent(k)] = decodeURIComponent(v);
  return out;
}
