import { createHmac, timingSafeEqual } from "node:crypto";
import type { Store } from "../../store/store.js";

/**
 * Per-sandbox access tokens: a keyed digest of the sandbox id under the server's key, so a token
 * opens that one sandbox and nothing else, needs no storage, and every server sharing the key
 * accepts it. Handed out by the E2B control plane (`envdAccessToken`) for the daemon routes,
 * which the E2B SDKs call without the API key.
 */
export class SandboxTokens {
  private readonly key: Buffer;

  constructor(
    serverKey: Buffer,
    private readonly store: Store,
  ) {
    this.key = createHmac("sha256", serverKey).update("sandtree sandbox access v1").digest();
  }

  tokenFor(sandboxId: string): string {
    return `sbt_${createHmac("sha256", this.key).update(sandboxId).digest("base64url")}`;
  }

  verify(sandboxId: string, token: string): boolean {
    const want = Buffer.from(this.tokenFor(sandboxId));
    const got = Buffer.from(token);
    return want.length === got.length && timingSafeEqual(want, got);
  }

  /** The team of the sandbox the token opens, or undefined (wrong token, or no such sandbox). */
  async teamFor(sandboxId: string, token: string): Promise<string | undefined> {
    if (!this.verify(sandboxId, token)) return undefined;
    return (await this.store.getSandbox(sandboxId))?.team_id;
  }
}
