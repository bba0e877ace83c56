import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { GatewayTokens } from "../../src/services/network/gateway-tokens.js";
import type { Store } from "../../src/store/store.js";

// What a token says is checked before the store is asked about its key (prime-client.test.ts
// covers the key's revocation on a real server).
const noStore = {
  getApiKey: async () => {
    throw new Error("not reached");
  },
} as unknown as Store;
const who = { teamId: "tm-a", keyId: "key-a", isAdmin: false };

describe("gateway tokens", () => {
  it("expire after their lifetime", async () => {
    const tokens = new GatewayTokens(randomBytes(32), noStore, 60_000);
    const { token, expiresAt } = tokens.issue(who, "sb-x", 1_000_000);
    expect(expiresAt.getTime()).toBe(1_060_000);
    await expect(tokens.verify(token, "sb-x", 1_060_000)).rejects.toMatchObject({ code: "UNAUTHORIZED", message: /expired/ });
  });

  it("are refused by a server with another key, and for another sandbox", async () => {
    const { token } = new GatewayTokens(randomBytes(32), noStore).issue(who, "sb-x");
    await expect(new GatewayTokens(randomBytes(32), noStore).verify(token, "sb-x")).rejects.toMatchObject({
      code: "UNAUTHORIZED",
    });
    const tokens = new GatewayTokens(randomBytes(32), noStore);
    await expect(tokens.verify(tokens.issue(who, "sb-x").token, "sb-y")).rejects.toMatchObject({ message: /for sandbox sb-x/ });
  });
});
