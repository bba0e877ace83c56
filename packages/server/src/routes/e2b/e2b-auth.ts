import { SandtreeError } from "@sandtree/protocol";
import type { FastifyRequest } from "fastify";
import type { Services } from "../../services/services.js";

export const SANDBOX_ID_HEADER = "e2b-sandbox-id";
export const ACCESS_TOKEN_HEADER = "x-access-token";

/** The control plane: the `X-API-KEY` header holds a sandtree API key. */
export async function authenticateApiKey(req: FastifyRequest, s: Services): Promise<void> {
  const key = req.headers["x-api-key"];
  if (typeof key !== "string" || key.length === 0) {
    throw new SandtreeError("UNAUTHORIZED", "missing API key: send `X-API-KEY: <SANDTREE_API_KEY>` (E2B_API_KEY)");
  }
  req.principal = await s.auth.authenticate(`Bearer ${key}`);
}

/**
 * The daemon routes: `E2b-Sandbox-Id` names the sandbox and `X-Access-Token` holds the token the
 * control plane handed out for it (the SDKs send no API key there). The caller acts as the
 * sandbox's team; another sandbox's token, or none, is 401.
 */
export async function authenticateSandbox(req: FastifyRequest, s: Services): Promise<string> {
  const id = req.headers[SANDBOX_ID_HEADER];
  const token = req.headers[ACCESS_TOKEN_HEADER];
  if (typeof id !== "string" || !/^sb-[a-z2-7]{16}$/.test(id)) {
    throw new SandtreeError("VALIDATION_FAILED", "the E2b-Sandbox-Id header must name a sandbox (sb-...)", {
      field: SANDBOX_ID_HEADER,
    });
  }
  const teamId = typeof token === "string" ? await s.sandboxTokens.teamFor(id, token) : undefined;
  if (!teamId) throw new SandtreeError("UNAUTHORIZED", `missing or wrong X-Access-Token for sandbox ${id}`);
  req.principal = { teamId, keyId: `sandbox:${id}`, isAdmin: false };
  await s.sandboxes.whenAdopted(id);
  return id;
}
