import { SandtreeError } from "@sandtree/protocol";
import { slotOf } from "../network/addresses.js";
import {
  guestNetOf,
  type HostNetworks,
  type NetworkAttachment,
  type OpenedNetworks,
  type OpenNetworksRequest,
  openAlready,
  type SandboxNetworkSpec,
} from "../network/host-networks.js";

/** The fake host's pool when none is configured (nothing is routed: no tap, no rule, no resolver). */
const FAKE_POOL = "10.250.0.0/16";

/**
 * Sandbox networks in memory: addresses from the pool by slot, tap names that name no device,
 * policies kept as given. Enough for tests above the seam to run with networks on.
 */
export class FakeNetworks implements HostNetworks {
  private subnet: string | null = null;
  /** Live networks by sandbox id (tests read their policies). */
  readonly live = new Map<string, SandboxNetworkSpec>();
  private templateTaps = 0;

  async open(req: OpenNetworksRequest): Promise<OpenedNetworks> {
    if (this.subnet !== null) throw openAlready();
    this.subnet = req.subnet ?? FAKE_POOL;
    this.live.clear();
    for (const net of req.live) this.live.set(net.sandboxId, { ...net });
    return { subnet: this.subnet, unavailable: null, skipped: [], attached: req.live.map((n) => this.attachment(n)) };
  }

  private attachment(net: SandboxNetworkSpec): NetworkAttachment {
    if (this.subnet === null) throw new Error("the fake host's networks are not open");
    const slot = slotOf(this.subnet, net.slot);
    const tap = `fake-${net.slot.toString(36)}`;
    return {
      sandboxId: net.sandboxId,
      tap,
      guestNet: guestNetOf(net.enabled, slot),
      address: slot.address,
      gateway: slot.gateway,
    };
  }

  /** Refuses a slot another sandbox holds, as a host whose tap for it exists does. */
  async attach(net: SandboxNetworkSpec): Promise<NetworkAttachment> {
    const a = this.attachment(net);
    const holder = [...this.live.values()].find((n) => n.slot === net.slot && n.sandboxId !== net.sandboxId);
    if (holder)
      throw new SandtreeError("NETWORK_SETUP_FAILED", `network setup failed: slot ${net.slot} is ${holder.sandboxId}'s`);
    this.live.set(net.sandboxId, { ...net });
    return a;
  }

  async update(sandboxId: string, change: Pick<SandboxNetworkSpec, "policy" | "generation">): Promise<void> {
    const net = this.live.get(sandboxId);
    if (net) this.live.set(sandboxId, { ...net, ...change });
  }

  async detach(sandboxId: string): Promise<void> {
    this.live.delete(sandboxId);
  }

  readonly taps = {
    acquire: async (): Promise<string> => `fake-t${(this.templateTaps++).toString(36)}`,
    release: async (): Promise<void> => {},
  };

  async close(): Promise<void> {
    this.subnet = null;
  }
}
