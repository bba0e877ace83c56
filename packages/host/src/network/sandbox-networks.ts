import { createHash } from "node:crypto";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { VolumeFileServer, volumeServerUnavailableReason } from "../volumes/file-server.js";
import { choosePool } from "./address-pool.js";
import { DnsResolver, nameMatches, type ResolverClient } from "./dns-resolver.js";
import { type DnsUpstream, parseUpstreams, systemUpstreams } from "./dns-upstream.js";
import { expireLearned, type Live, resolveDenied, resolvedOf, resolverClient } from "./egress-names.js";
import {
  guestNetOf,
  type HostNetworks,
  type NetworkAttachment,
  type OpenedNetworks,
  type OpenNetworksRequest,
  openAlready,
  type SandboxNetworkSpec,
} from "./host-networks.js";
import { type EgressPolicy, NetworkManager, networkUnavailableReason, type SandboxNetSpec } from "./network-manager.js";
import { openTunnelProxies } from "./tunnel-proxy.js";

/** Where servers claim their address pools (one file per pool and network namespace). */
const POOL_CLAIMS_DIR = "/run/sandtree/pools";

export interface SandboxNetworksOptions {
  /** Where what goes wrong beside a call (tunnels not restored, a denylist update) is told: every maker says. */
  log: { warn(o: object, m: string): void };
}

/** The volume file server these networks carry to their sandboxes, or why there is none. */
export type NetworkVolumes = { server: VolumeFileServer } | { server: null; why: string };

const NOT_OPEN = "its sandboxes have no network (volumes are served over it)";

/**
 * This machine's sandbox networks (the host's part, see HostNetworks): a tap per sandbox, the
 * egress policy as nftables rules, a DNS resolver that enforces hostname rules and tells the
 * firewall what they resolved to, and tunnels (a TCP proxy per tunnel on the sandbox's gateway).
 */
export class SandboxNetworks implements HostNetworks {
  private manager: NetworkManager | null = null;
  private resolver: DnsResolver | null = null;
  private upstreams: DnsUpstream[] = [];
  /** Live networks by sandbox id, and by guest address (the resolver's lookup). */
  private readonly live = new Map<string, Live>();
  private readonly byAddress = new Map<string, Live>();
  private templateTaps = 0;
  private sweeper: NodeJS.Timeout | null = null;
  private releasePool: () => void = () => {};
  private volumeServer: VolumeFileServer | null = null;
  private volumesWhy = NOT_OPEN;

  constructor(private readonly opts: SandboxNetworksOptions) {}

  private warn(o: object, m: string): void {
    this.opts.log.warn(o, m);
  }

  async open(req: OpenNetworksRequest): Promise<OpenedNetworks> {
    if (this.manager !== null) throw openAlready();
    const reason = await networkUnavailableReason();
    if (reason) {
      if (req.enabled === "on") throw new Error(`sandbox networking is unavailable: ${reason}`);
      this.volumesWhy = `${NOT_OPEN}: ${reason}`;
      return { subnet: null, unavailable: reason };
    }
    const tag = createHash("sha256").update(path.resolve(req.dataDir)).digest("hex").slice(0, 4);
    // Not an address of this host's (another server's taps, up or down; a LAN) nor another live server's pool.
    const choice = await choosePool({
      configured: req.subnet,
      stateFile: path.join(req.dataDir, "network-pool"),
      ownPrefix: `st${tag}-`,
      dataDir: req.dataDir,
      claimsDir: POOL_CLAIMS_DIR,
    });
    if (choice.subnet === null) {
      if (req.enabled === "on") throw new Error(choice.reason);
      this.volumesWhy = `${NOT_OPEN}: ${choice.reason}`;
      return { subnet: null, unavailable: choice.reason };
    }
    this.releasePool = () => choice.release();
    this.upstreams = req.dnsUpstreams.length ? parseUpstreams(req.dnsUpstreams) : systemUpstreams();
    this.resolver = new DnsResolver({
      upstream: this.upstreams,
      clientFor: (addr) => this.clientFor(addr),
      ...(req.dnsRateLimit ? { rateLimit: req.dnsRateLimit } : {}),
      log: { warn: (o, m) => this.warn(o, m) },
    });
    const { udpPort } = await this.resolver.listen("0.0.0.0", 0);
    const stateFile = path.join(req.dataDir, "network-host-state.json");
    const volumes = await this.openVolumeServer(req.dataDir);
    const volumePorts = volumes ? [volumes.ports.nfs, volumes.ports.mount] : [];
    const manager = new NetworkManager({ tag, subnet: choice.subnet, resolverPort: udpPort, stateFile, volumePorts });
    const specs: SandboxNetSpec[] = [];
    for (const net of req.live) {
      const l = this.track(net, manager);
      await this.openTunnels(l).catch((err) => this.warn({ sandbox: net.sandboxId, err: String(err) }, "tunnels not restored"));
      specs.push(l.spec);
    }
    await manager.init(specs).catch(async (err: unknown) => {
      // Half set up (forwarding, the table, taps): taken down before the failure goes on.
      await manager.destroy().catch(() => {});
      throw err;
    });
    this.manager = manager;
    this.sweeper = setInterval(() => void this.sweep(), 30_000);
    this.sweeper.unref();
    const attached = [...this.live.values()].map((l) => attachment(l));
    return { subnet: choice.subnet, unavailable: null, skipped: choice.skipped, attached };
  }

  /** The volume file server its sandboxes mount volumes from (over these networks), or why there is none. */
  get volumes(): NetworkVolumes {
    return this.volumeServer ? { server: this.volumeServer } : { server: null, why: this.volumesWhy };
  }

  /**
   * The file server opens with the networks (it picks its ports, kept in `dataDir`, for their
   * firewall; NFS-Ganesha itself starts on the first mount), where this machine can run one.
   * One kept by a close without `destroy` (its machines ran on) serves again.
   */
  private async openVolumeServer(dataDir: string): Promise<VolumeFileServer | null> {
    if (this.volumeServer) return this.volumeServer;
    const why = volumeServerUnavailableReason();
    if (why) {
      this.volumesWhy = why;
      return null;
    }
    const log = { warn: (o: object, m: string) => this.warn(o, m) };
    this.volumeServer = await VolumeFileServer.open({ dir: path.join(dataDir, "volume-server"), log });
    return this.volumeServer;
  }

  private async closeVolumeServer(): Promise<void> {
    const server = this.volumeServer;
    this.volumeServer = null;
    this.volumesWhy = NOT_OPEN;
    await server?.close();
  }

  private track(net: SandboxNetworkSpec, manager: NetworkManager): Live {
    const slot = manager.slot(net.slot);
    const l: Live = {
      enabled: net.enabled,
      tunnels: net.tunnels,
      spec: {
        sandboxId: net.sandboxId,
        slot,
        tap: manager.tapName(slot.index),
        policy: net.policy,
        tunnels: [],
        generation: net.generation,
        resolved: [],
      },
      learned: new Map(),
      denied: new Set(),
      proxies: [],
    };
    this.live.set(net.sandboxId, l);
    this.byAddress.set(slot.address, l);
    return l;
  }

  async attach(net: SandboxNetworkSpec): Promise<NetworkAttachment> {
    const manager = this.manager;
    if (!manager) throw new SandtreeError("NETWORK_SETUP_FAILED", "this host's sandbox networks are not open");
    const l = this.track(net, manager);
    try {
      await manager.createTap(l.spec.tap, l.spec.slot);
      await this.openTunnels(l);
      await manager.addRules(l.spec);
      this.refreshDenied(l);
    } catch (err) {
      await this.detach(net.sandboxId);
      throw new SandtreeError("NETWORK_SETUP_FAILED", `network setup failed: ${(err as Error).message}`);
    }
    return attachment(l);
  }

  async update(sandboxId: string, change: { policy: EgressPolicy; generation: number }): Promise<void> {
    const l = this.live.get(sandboxId);
    if (!l) return;
    l.spec.policy = change.policy;
    l.spec.generation = change.generation;
    // Addresses learned for names the new policy no longer allows are forgotten.
    for (const name of [...l.learned.keys()]) {
      if (change.policy.mode !== "allowlist" || !nameMatches(name, change.policy.allow)) l.learned.delete(name);
    }
    l.denied.clear();
    l.spec.resolved = resolvedOf(l);
    await this.manager?.update(l.spec);
    this.refreshDenied(l);
  }

  async detach(sandboxId: string): Promise<void> {
    const l = this.live.get(sandboxId);
    if (!l) return;
    this.live.delete(sandboxId);
    if (this.byAddress.get(l.spec.slot.address) === l) this.byAddress.delete(l.spec.slot.address);
    for (const p of l.proxies) p.close();
    await this.manager?.remove(l.spec.slot.index, l.spec.tap);
  }

  readonly taps = {
    acquire: async (): Promise<string> => {
      if (!this.manager) throw new Error("networking is off");
      const tap = `${this.manager.tapPrefix}t${(this.templateTaps++).toString(36)}`;
      await this.manager.createTap(tap, null);
      return tap;
    },
    release: async (tap: string): Promise<void> => {
      await this.manager?.deleteTap(tap);
    },
  };

  /** Every 30 s: drops expired learned addresses; re-resolves denylisted names. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const l of this.live.values()) {
      if (l.spec.policy.mode === "denylist") this.refreshDenied(l);
      else if (expireLearned(l, now)) await this.applyResolved(l).catch(() => {});
    }
  }

  /** The resolver's view of the sandbox at `address` (null: unknown, or its network is off). */
  private clientFor(address: string): ResolverClient | null {
    const l = this.byAddress.get(address);
    return l?.enabled ? resolverClient(l, () => this.applyResolved(l)) : null;
  }

  /** Puts what the sandbox's hostname rules resolved to into its firewall rules. */
  private async applyResolved(l: Live): Promise<void> {
    l.spec.resolved = resolvedOf(l);
    await this.manager?.update(l.spec);
  }

  /** Denylisted hostnames resolved by the host, so connecting to their addresses directly is blocked too. */
  private refreshDenied(l: Live): void {
    resolveDenied(l, this.upstreams, () => this.live.get(l.spec.sandboxId) === l)
      .then((grew) => (grew ? this.applyResolved(l) : undefined))
      .catch((err) => this.warn({ err: String(err) }, "denylist update failed"));
  }

  /** One TCP proxy per tunnel on the sandbox's gateway address; only the sandbox may connect. */
  private async openTunnels(l: Live): Promise<void> {
    l.spec.tunnels = [];
    await openTunnelProxies(l.spec, l.tunnels, l.proxies);
  }

  async close(opts: { destroy: boolean }): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const l of this.live.values()) for (const p of l.proxies) p.close();
    await this.resolver?.close();
    try {
      if (opts.destroy) await this.manager?.destroy();
    } finally {
      // With every machine gone (destroy): the file server they mounted goes too. Otherwise it
      // serves on, as the rules and taps stay, for the machines that run on.
      if (opts.destroy) await this.closeVolumeServer();
    }
    this.manager = null;
    this.resolver = null;
    // Opened again (a worker's caller restarted), only the live networks it names are tracked.
    this.live.clear();
    this.byAddress.clear();
    this.releasePool();
  }
}

function attachment(l: Live): NetworkAttachment {
  const { slot, tap, sandboxId } = l.spec;
  return { sandboxId, tap, guestNet: guestNetOf(l.enabled, slot), address: slot.address, gateway: slot.gateway };
}
