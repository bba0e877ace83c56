import { createHmac, timingSafeEqual } from "node:crypto";
import { SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { Principal } from "../teams/auth-service.js";

/** How long a gateway token lasts: the Prime client asks for a new one a minute before. */
export const GATEWAY_TOKEN_TTL_MS = 15 * 60 * 1000;

interface Claims {
  /** team, key, sandbox, expiry (ms since the epoch) */
  t: string;
  k: string;
  s: string;
  e: number;
}

const PREFIX = "stg1";

/**
 * Short-lived tokens for one sandbox of one team, minted for a caller holding an API key (the
 * Prime gateway's `POST /sandbox/{id}/auth`). Stateless: an HMAC under a subkey of the server's
 * key (the same on every control plane of a fleet). Each use re-checks the key it was minted
 * for, so revoking that key ends its tokens too: a token never outlives its key.
 */
export class GatewayTokens {
  private readonly macKey: Buffer;

  constructor(
    serverKey: Buffer,
    private readonly store: Store,
    private readonly ttlMs = GATEWAY_TOKEN_TTL_MS,
  ) {
    this.macKey = createHmac("sha256", serverKey).update("sandtree gateway tokens v1").digest();
  }

  issue(p: Principal, sandboxId: string, now = Date.now()): { token: string; expiresAt: Date } {
    const claims: Claims = { t: p.teamId, k: p.keyId, s: sandboxId, e: now + this.ttlMs };
    const body = Buffer.from(JSON.stringify(claims)).toString("base64url");
    return { token: `${PREFIX}.${body}.${this.mac(body)}`, expiresAt: new Date(claims.e) };
  }

  /** The principal a token stands for, if it is valid for this sandbox; else 401 UNAUTHORIZED. */
  async verify(token: string | undefined, sandboxId: string, now = Date.now()): Promise<Principal> {
    const claims = token ? this.claims(token) : null;
    if (!claims) throw new SandtreeError("UNAUTHORIZED", "missing or invalid gateway token: ask POST /sandbox/{id}/auth for one");
    if (claims.s !== sandboxId)
      throw new SandtreeError("UNAUTHORIZED", `this gateway token is for sandbox ${claims.s}, not ${sandboxId}`);
    if (claims.e <= now)
      throw new SandtreeError("UNAUTHORIZED", "the gateway token expired: ask POST /sandbox/{id}/auth for a new one");
    const key = await this.store.getApiKey(claims.k);
    if (!key || key.revoked_at || key.team_id !== claims.t) {
      throw new SandtreeError("UNAUTHORIZED", "the API key this gateway token was issued to is revoked");
    }
    return { teamId: claims.t, keyId: claims.k, isAdmin: key.is_admin };
  }

  private mac(body: string): string {
    return createHmac("sha256", this.macKey).update(body).digest("base64url");
  }

  private claims(token: string): Claims | null {
    const [prefix, body, mac] = token.split(".");
    if (prefix !== PREFIX || !body || !mac) return null;
    const want = Buffer.from(this.mac(body));
    const got = Buffer.from(mac);
    if (want.length !== got.length || !timingSafeEqual(want, got)) return null;
    try {
      const c = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as Partial<Claims>;
      if (typeof c.t !== "string" || typeof c.k !== "string" || typeof c.s !== "string" || typeof c.e !== "number") return null;
      return c as Claims;
    } catch {
      return null;
    }
  }
}
