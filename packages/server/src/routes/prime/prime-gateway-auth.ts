import { type Sandbox, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import type { Principal } from "../../services/teams/auth-service.js";

export const GatewayParams = z.object({ ns: z.string().min(1).max(64), sid: z.string().min(1).max(64) });

/** A sandbox that ended: Prime's gateway answers 410 `{"error": "sandbox_terminated"}`, its client's cue. */
export class SandboxGoneError extends SandtreeError {
  constructor(sb: Sandbox) {
    super("SANDBOX_NOT_RUNNING", `sandbox ${sb.id} is ${sb.status}`, { id: sb.id, status: sb.status });
  }
}

/**
 * The caller of a gateway route: its token (from `POST /sandbox/{id}/auth`) must be for the
 * sandbox of the path (`{ns}` is its team, `{sid}` the sandbox), minted for a key not revoked.
 * A sandbox that ended is refused with SandboxGoneError; one being adopted after a restart is
 * waited for, as the native routes do.
 */
export async function gatewayCaller(
  s: Services,
  params: unknown,
  authorization: string | undefined,
): Promise<{ principal: Principal; sandbox: Sandbox }> {
  const { ns, sid } = parse(GatewayParams, params);
  const m = authorization ? /^Bearer\s+(\S+)$/i.exec(authorization) : null;
  const principal = await s.gatewayTokens.verify(m?.[1], sid);
  if (principal.teamId !== ns) throw new SandtreeError("UNAUTHORIZED", `this gateway token is not for namespace ${ns}`);
  await s.sandboxes.whenAdopted(sid);
  const sandbox = await s.sandboxes.get(principal.teamId, sid);
  if (TERMINAL_STATUSES.includes(sandbox.status)) throw new SandboxGoneError(sandbox);
  return { principal, sandbox };
}
