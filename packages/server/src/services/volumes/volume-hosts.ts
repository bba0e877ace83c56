import type { HostCapabilities, HostVolumes } from "@sandtree/host";

/**
 * Where each volume's storage is reached: the volumes port of the host it lives on (a volume's
 * `host_id`; null for this control plane's own host), whichever host that is.
 */
export interface VolumeHosts {
  /** That host's volumes port (UNAVAILABLE when this control plane reaches no such host now). */
  of(hostId: string | null): Promise<HostVolumes>;
  /** That host's volumes port, or null when this control plane reaches no such host now. */
  find(hostId: string | null): Promise<HostVolumes | null>;
  /** Whether machines on that host may mount volumes (its capabilities; a host not reached: no). */
  mounts(hostId: string | null): Promise<HostCapabilities["volumes"]>;
}
