import type { HostNetworks, OpenedNetworks, OpenNetworksRequest } from "../network/host-networks.js";

const WHY = "networks of a remote host are not served yet";

/**
 * A remote host's sandbox networks: not served over the host service yet, so a server on a
 * remote host gives its sandboxes no network and says why (NETWORK_UNAVAILABLE), never silently.
 */
export class UnservedNetworks implements HostNetworks {
  async open(req: OpenNetworksRequest): Promise<OpenedNetworks> {
    if (req.enabled === "on") throw new Error(`sandbox networking is unavailable: ${WHY}`);
    return { subnet: null, unavailable: WHY };
  }

  async attach(): Promise<never> {
    throw new Error(WHY);
  }

  async update(): Promise<void> {
    throw new Error(WHY);
  }

  /** Nothing was attached: nothing to remove. */
  async detach(): Promise<void> {}

  readonly taps = {
    acquire: async (): Promise<string> => {
      throw new Error(WHY);
    },
    release: async (): Promise<void> => {},
  };

  async close(): Promise<void> {}
}
