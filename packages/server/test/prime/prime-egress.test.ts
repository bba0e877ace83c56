import { describe, expect, it } from "vitest";
import { fakeInternetUnavailableReason } from "../network/fake-internet.js";
import { networkedServerForFile } from "../network/host-server.js";
import { runPrime } from "./prime-helpers.js";

// Prime's egress policy (create's network_allowlist, get_network, set_network) on sandtree's
// sandbox networks, against the fake internet of network.test.ts, through the real client.

const unavailable = fakeInternetUnavailableReason();

describe.skipIf(unavailable !== null)(`Prime egress policy${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  const world = networkedServerForFile({ SANDTREE_NETWORK_DEFAULT: "deny", SANDTREE_NETWORK_SUBNET: "10.78.0.0/16" });

  it("creates with an allowlist, reads the policy, replaces it (allow, deny, '*') and sandboxes follow it", async () => {
    const r = await runPrime("prime_steps.py", ["egress", JSON.stringify({ image: "sandtree/debian" })], {
      base: `${world.server.base}/prime`,
      key: world.server.key(),
    });
    expect(r.created).toEqual(["allowed.test"]);
    expect(r.initial).toMatchObject({ policy: { allowlist: ["allowed.test"], denylist: null }, applied: true });
    expect(r.initial_probes).toEqual(["OK hello from 203.0.113.10", expect.stringMatching(/^ERR/)]);
    expect(r.allow_other.policy).toEqual({ allowlist: ["other.test"], denylist: null });
    expect(r.allow_other.applied).toBe(true);
    expect(r.allow_other_probes).toEqual([expect.stringMatching(/^ERR/), "OK hello from 203.0.113.20"]);
    expect(r.deny_all.policy).toEqual({ allowlist: [], denylist: null });
    expect(r.deny_all_probes).toEqual([expect.stringMatching(/^ERR/)]);
    expect(r.allow_all.policy).toEqual({ allowlist: null, denylist: [] });
    expect(r.allow_all_probes).toEqual(["OK hello from 203.0.113.10", "OK hello from 203.0.113.40"]);
    expect(r.deny_one.policy).toEqual({ allowlist: null, denylist: ["denied.test"] });
    expect(r.deny_one_probes).toEqual(["OK hello from 203.0.113.10", expect.stringMatching(/^ERR/)]);
  });
});
