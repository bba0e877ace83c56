import type { HostCapabilities, HostVolumes, MachineHost } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { VolumeHosts } from "../volumes/volume-hosts.js";
import type { HostBundles } from "./host-bundles.js";

/**
 * Volumes reached through the bundle of the host they live on (SandboxService.bundles): a host id
 * is named in the fleet's registry (`hostName`), and that name's bundle holds the host; null is
 * this process's own host. A worker's bundle is its remote host, so its volumes port is the worker's.
 */
export class BundleVolumes implements VolumeHosts {
  constructor(
    private readonly bundles: () => HostBundles,
    private readonly hostName: (hostId: string) => Promise<string>,
  ) {}

  private async host(hostId: string | null): Promise<MachineHost | null> {
    const bundles = this.bundles();
    const bundle = hostId === null ? bundles.local : bundles.named(await this.hostName(hostId));
    return bundle?.host ?? null;
  }

  async find(hostId: string | null): Promise<HostVolumes | null> {
    return (await this.host(hostId))?.volumes ?? null;
  }

  async of(hostId: string | null): Promise<HostVolumes> {
    const port = await this.find(hostId);
    if (port) return port;
    const name = hostId === null ? "this host" : await this.hostName(hostId);
    throw new SandtreeError(
      "UNAVAILABLE",
      `host ${name} holds the volume and this control plane does not reach it now: try again`,
      {
        host: name,
      },
    );
  }

  async mounts(hostId: string | null): Promise<HostCapabilities["volumes"]> {
    const host = await this.host(hostId);
    return host ? host.capabilities.volumes : { ok: false, why: "this control plane does not reach that host" };
  }
}
