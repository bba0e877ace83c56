import { SandtreeError } from "@sandtree/protocol";
import type { TemplateTaps } from "../snapshots/template-store.js";
import type { EgressPolicy } from "./network-manager.js";

/**
 * Sandbox networks as a port of the host (MachineHost.networks): the host's part of them, in
 * plain data a control plane can send over a wire. The control plane keeps the records (policy,
 * slot, generation, whether it is applied) and tells the host what to run; the host owns the
 * address pool it chose, the taps and firewall rules, the DNS resolver and what it learned,
 * and the tunnels.
 */

/** One sandbox's network as the control plane recorded it. */
export interface SandboxNetworkSpec {
  sandboxId: string;
  /** Its /30 of the host's pool (the control plane allocates it among `slotCount(subnet)`). */
  slot: number;
  /** False: the sandbox has a NIC with its link down (`network: false`). */
  enabled: boolean;
  policy: EgressPolicy;
  /** name -> HOST:PORT on the host's side; `<name>.sandtree.internal` inside the sandbox. */
  tunnels: Record<string, string>;
  /** Bumped on every policy change. */
  generation: number;
}

/** Where a sandbox's network lives on the host. */
export interface NetworkAttachment {
  sandboxId: string;
  /** The NIC to give the VMM. */
  tap: string;
  /** The guest's eth0 setting ("ADDR/PREFIX GATEWAY"; "-" keeps a disabled network's link down). */
  guestNet: string;
  address: string;
  gateway: string;
}

/** What the control plane asks of the host's networks when it starts. */
export interface OpenNetworksRequest {
  /** The host's state directory (the pool it chose last, what it changed of the host). */
  dataDir: string;
  /** The address pool; unset: the one used before, else the first free one. */
  subnet?: string | undefined;
  /** "on": refuse to open without networks; "auto": answer why there are none. */
  enabled: "auto" | "on";
  /** Upstream DNS servers ("HOST" or "HOST:PORT"); empty: /etc/resolv.conf's. */
  dnsUpstreams: string[];
  /** Each sandbox's DNS budget: queries per second and burst. */
  dnsRateLimit?: { perSecond: number; burst: number } | undefined;
  /** The networks of sandboxes still active: their taps, rules and tunnels are made again. */
  live: SandboxNetworkSpec[];
}

/** The host's networks once open: its pool and the live networks' attachments; or why there are none. */
export type OpenedNetworks =
  | { subnet: string; unavailable: null; skipped: string[]; attached: NetworkAttachment[] }
  | { subnet: null; unavailable: string };

export interface HostNetworks {
  /** Chooses the pool, starts the resolver and rebuilds the firewall for `live`. NETWORK_UNAVAILABLE while open: close first. */
  open(req: OpenNetworksRequest): Promise<OpenedNetworks>;
  /** A tap, tunnels and rules for the sandbox (before its VM starts). NETWORK_SETUP_FAILED, undone, on failure. */
  attach(spec: SandboxNetworkSpec): Promise<NetworkAttachment>;
  /** Replaces a live network's policy; live connections are checked again. */
  update(sandboxId: string, change: { policy: EgressPolicy; generation: number }): Promise<void>;
  /** Removes the sandbox's rules, tap and tunnels. Idempotent. */
  detach(sandboxId: string): Promise<void>;
  /** Taps for template VMs: no address and no rules, so everything they send is dropped. */
  readonly taps: TemplateTaps;
  /** Stops the resolver and tunnels; with `destroy` also removes every rule and tap. */
  close(opts: { destroy: boolean }): Promise<void>;
}

/** The eth0 setting of a sandbox at `slot`. */
export function guestNetOf(enabled: boolean, slot: { address: string; prefix: number; gateway: string }): string {
  return enabled ? `${slot.address}/${slot.prefix} ${slot.gateway}` : "-";
}

/** What opening a host's networks while they are open answers (a worker whose own server holds them). */
export function openAlready(): SandtreeError {
  return new SandtreeError(
    "NETWORK_UNAVAILABLE",
    "this host's sandbox networks are open already (another control plane holds them): close them first",
  );
}
