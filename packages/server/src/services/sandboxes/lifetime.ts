import type { CreateSandboxParams } from "@sandtree/protocol";

export interface LifetimeFields {
  timeout_minutes: number | null;
  idle_timeout_minutes: number | null;
  expires_at: string | null;
  last_activity_at: string;
}

/** The lifetime columns of a new sandbox: a negative timeout means no limit. */
export function lifetimeFields(
  params: Pick<CreateSandboxParams, "timeout_minutes" | "idle_timeout_minutes">,
  createdAt: string,
): LifetimeFields {
  const timeout = params.timeout_minutes > 0 ? params.timeout_minutes : null;
  return {
    timeout_minutes: timeout,
    idle_timeout_minutes: params.idle_timeout_minutes ?? null,
    expires_at: timeout === null ? null : new Date(Date.parse(createdAt) + timeout * 60_000).toISOString(),
    last_activity_at: createdAt,
  };
}

/** Why a sandbox should end now, or null: its lifetime ran out, or it has been idle too long. */
export function expiryReason(
  sb: {
    expires_at?: string | null | undefined;
    idle_timeout_minutes?: number | null | undefined;
    last_activity_at?: string | null | undefined;
    created_at: string;
  },
  lastActivityMs: number | undefined,
  nowMs: number,
): string | null {
  if (sb.expires_at && Date.parse(sb.expires_at) <= nowMs) return "the sandbox reached its timeout_minutes";
  if (sb.idle_timeout_minutes) {
    const last = Math.max(lastActivityMs ?? 0, Date.parse(sb.last_activity_at ?? sb.created_at));
    if (nowMs - last >= sb.idle_timeout_minutes * 60_000) return "the sandbox was idle for idle_timeout_minutes";
  }
  return null;
}
