// One conformance suite for every host's sandbox networks (MachineHost.networks, the port the
// control plane's NetworkService drives): what the control plane relies on, through the interface
// only. A host whose networks need root and nftables (QEMU's) is checked by the server's network
// tests in namespaces of their own; the fake host runs this (fake-host.test.ts), and a remote host
// in front of one (remote-fake-host.test.ts).
import { SandtreeError } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HostNetworks, SandboxNetworkSpec } from "../../src/index.js";
import { cidrContains } from "../../src/index.js";

const POOL = "10.77.0.0/24";

function net(sandboxId: string, slot: number, extra: Partial<SandboxNetworkSpec> = {}): SandboxNetworkSpec {
  return {
    sandboxId,
    slot,
    enabled: true,
    policy: { mode: "allow_all", allow: [], deny: [] },
    tunnels: {},
    generation: 1,
    ...extra,
  };
}

export function hostNetworksConformance(
  name: string,
  make: () => Promise<{ networks: HostNetworks; dataDir: string; close?: () => Promise<void> }>,
): void {
  describe(`HostNetworks conformance: ${name}`, () => {
    let networks: HostNetworks;
    let close: () => Promise<void> = async () => {};

    beforeAll(async () => {
      const t = await make();
      networks = t.networks;
      close = t.close ?? close;
      const opened = await networks.open({
        dataDir: t.dataDir,
        subnet: POOL,
        enabled: "on",
        dnsUpstreams: [],
        live: [net("sb-live", 3)],
      });
      expect(opened.subnet).toBe(POOL);
      if (opened.subnet === null) return;
      // A sandbox still active when the control plane started is there again, at its slot.
      expect(opened.attached).toEqual([expect.objectContaining({ sandboxId: "sb-live", address: "10.77.0.14" })]);
    });

    afterAll(async () => {
      await networks?.close({ destroy: true });
      await close();
    });

    it("attaches a sandbox at its slot: an address and gateway of the pool, and eth0's setting", async () => {
      const a = await networks.attach(net("sb-a", 1));
      expect(cidrContains(POOL, a.address)).toBe(true);
      expect(cidrContains(POOL, a.gateway)).toBe(true);
      expect(a).toMatchObject({ sandboxId: "sb-a", address: "10.77.0.6", gateway: "10.77.0.5" });
      expect(a.guestNet).toBe("10.77.0.6/30 10.77.0.5");
      expect(a.tap).not.toBe("");
    });

    it("keeps a network with its link down for a sandbox without one", async () => {
      const d = await networks.attach(net("sb-down", 2, { enabled: false }));
      expect(d.guestNet).toBe("-");
      expect(d.address).toBe("10.77.0.10");
    });

    it("keeps an updated network where it is: its slot stays taken", async () => {
      await networks.update("sb-a", { policy: { mode: "allowlist", allow: ["example.com"], deny: [] }, generation: 2 });
      const err = await networks.attach(net("sb-b", 1)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SandtreeError);
      expect((err as SandtreeError).code).toBe("NETWORK_SETUP_FAILED");
    });

    it("frees a detached sandbox's slot (detach is idempotent), and another takes it", async () => {
      await networks.detach("sb-a");
      await networks.detach("sb-a");
      const b = await networks.attach(net("sb-b", 1));
      expect(b.address).toBe("10.77.0.6");
    });

    it("ignores an update of a sandbox it has no network of", async () => {
      await expect(
        networks.update("sb-none", { policy: { mode: "deny_all", allow: [], deny: [] }, generation: 5 }),
      ).resolves.toBeUndefined();
    });
  });
}
