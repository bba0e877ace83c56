import type { Client } from "@connectrpc/connect";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type {
  HostNetworks,
  NetworkAttachment,
  OpenedNetworks,
  OpenNetworksRequest,
  SandboxNetworkSpec,
} from "../network/host-networks.js";
import type { EgressPolicy } from "../network/network-manager.js";
import type { TemplateTaps } from "../snapshots/template-store.js";
import { attachmentOf, openedOf, policyMsg, specMsg } from "./network-msgs.js";
import { remoteCall } from "./remote-errors.js";

/**
 * A remote host's sandbox networks: the worker's taps, rules, resolver and tunnels, driven over
 * its host service. The worker keeps their state in its own directory: the request's `dataDir`
 * (a path on this machine) is not sent. Tap names answered are the worker's, for its machines.
 */
export class RemoteNetworks implements HostNetworks {
  /** `onOpened`: told once the worker's networks opened (what its host can do may have changed). */
  constructor(
    private readonly client: Client<typeof MachineHostService>,
    private readonly onOpened: () => Promise<void> = async () => {},
  ) {}

  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return remoteCall(what, fn);
  }

  open(req: OpenNetworksRequest): Promise<OpenedNetworks> {
    return this.call("opening the sandbox networks", async () =>
      openedOf(
        await this.client.openNetworks({
          ...(req.subnet !== undefined ? { subnet: req.subnet } : {}),
          enabled: req.enabled,
          dnsUpstreams: req.dnsUpstreams,
          ...(req.dnsRateLimit ? { dnsRateLimit: req.dnsRateLimit } : {}),
          live: req.live.map(specMsg),
        }),
      ),
    ).then(async (opened) => {
      await this.onOpened();
      return opened;
    });
  }

  attach(spec: SandboxNetworkSpec): Promise<NetworkAttachment> {
    return this.call(`attaching ${spec.sandboxId}'s network`, async () =>
      attachmentOf(await this.client.attachNetwork(specMsg(spec))),
    );
  }

  async update(sandboxId: string, change: { policy: EgressPolicy; generation: number }): Promise<void> {
    await this.call(`updating ${sandboxId}'s network`, () =>
      this.client.updateNetwork({ sandboxId, policy: policyMsg(change.policy), generation: change.generation }),
    );
  }

  async detach(sandboxId: string): Promise<void> {
    await this.call(`detaching ${sandboxId}'s network`, () => this.client.detachNetwork({ sandboxId }));
  }

  readonly taps: TemplateTaps = {
    acquire: () => this.call("acquiring a template tap", async () => (await this.client.acquireTemplateTap({})).tap),
    release: async (tap) => {
      await this.call(`releasing template tap ${tap}`, () => this.client.releaseTemplateTap({ tap }));
    },
  };

  async close(opts: { destroy: boolean }): Promise<void> {
    await this.call("closing the sandbox networks", () => this.client.closeNetworks({ destroy: opts.destroy }));
  }
}
