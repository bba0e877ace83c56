import { createHash } from "node:crypto";
import path from "node:path";
import {
  choosePool,
  DnsResolver,
  type DnsUpstream,
  LOCAL_DNS_SUFFIX,
  NetworkManager,
  nameMatches,
  networkUnavailableReason,
  type ResolverClient,
  type SandboxNetSpec,
  slotCount,
  systemUpstreams,
} from "@sandtree/host";
import {
  type CreateSandboxParams,
  type SandboxNetwork,
  SandtreeError,
  TERMINAL_STATUSES,
  type UpdateNetworkRequest,
} from "@sandtree/protocol";
import type { NetworkRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { KeyedSerial } from "../support/keyed-serial.js";
import { expireLearned, type Live, resolveDenied, resolvedOf, resolverClient } from "./egress-names.js";
import { egressPolicy, networkUnavailable, parseUpstreams } from "./egress-policy.js";
import { openTunnelProxies } from "./tunnel-proxy.js";

/** A create's network settings (what a fork's children inherit, all optional). */
type NetworkParams = Pick<CreateSandboxParams, "network" | "network_allowlist" | "network_denylist" | "tunnels">;

export interface NetworkConfig {
  /** "auto": on when the host allows it (root, nft, /dev/net/tun); "off": no sandbox gets a NIC. */
  enabled: "auto" | "on" | "off";
  /** The sandbox address pool (each sandbox takes a /30); unset: the first free of `defaultPools()`. */
  subnet?: string | undefined;
  /** Policy of a sandbox created without a list. */
  defaultPolicy: "allow" | "deny";
  /** Upstream DNS servers ("HOST" or "HOST:PORT"); default: /etc/resolv.conf's. */
  dnsUpstreams: string[];
  /** Each sandbox's DNS budget (token bucket): queries per second and burst; REFUSED beyond. */
  dnsRateLimit?: { perSecond: number; burst: number };
  /** The volume file server's TCP ports (VolumeFileServer.ports), opened to every sandbox's gateway. */
  volumePorts?: number[];
}

/** Where servers claim their address pools (one file per pool and network namespace). */
const POOL_CLAIMS_DIR = "/run/sandtree/pools";

/**
 * Sandbox networks: a pool slot and tap per sandbox, the egress policy as nftables rules,
 * a DNS resolver that enforces hostname rules and tells the firewall what they resolved to,
 * and tunnels (a TCP proxy per tunnel on the sandbox's gateway address).
 */
export class NetworkService {
  private manager: NetworkManager | null = null;
  private resolver: DnsResolver | null = null;
  private upstreams: DnsUpstream[] = [];
  /** Live networks by sandbox id, and by guest address (the resolver's lookup). */
  private readonly live = new Map<string, Live>();
  private readonly byAddress = new Map<string, Live>();
  private readonly updates = new KeyedSerial();
  private templateTaps = 0;
  private sweeper: NodeJS.Timeout | null = null;
  /** The address pool in use (once started with networks). */
  subnet = "";
  private releasePool: () => void = () => {};
  /** Why sandboxes get no network on this server (null: they do). */
  unavailable: string | null = "not started";

  constructor(private readonly deps: { store: Store; log: Logger; dataDir: string; config: NetworkConfig }) {}

  get enabled(): boolean {
    return this.manager !== null;
  }

  /**
   * Starts the resolver and rebuilds the firewall for the sandboxes still active. `notMine`: the
   * sandboxes another server runs (a peer control plane on a shared database), left alone: no
   * rules, tunnels or taps here, and their slots are not released.
   */
  async start(opts: { notMine?: ReadonlySet<string> } = {}): Promise<void> {
    const { config, log, store } = this.deps;
    if (config.enabled === "off") {
      this.unavailable = "networking is turned off in the server's configuration";
      return;
    }
    const reason = await networkUnavailableReason();
    if (reason) {
      if (config.enabled === "on") throw new Error(`sandbox networking is unavailable: ${reason}`);
      this.unavailable = reason;
      log.warn({ reason }, "sandboxes get no network");
      return;
    }
    const tag = createHash("sha256").update(path.resolve(this.deps.dataDir)).digest("hex").slice(0, 4);
    // Not an address of this host's (another server's taps, up or down; a LAN) nor another live server's pool.
    const choice = await choosePool({
      configured: config.subnet,
      stateFile: path.join(this.deps.dataDir, "network-pool"),
      ownPrefix: `st${tag}-`,
      dataDir: this.deps.dataDir,
      claimsDir: POOL_CLAIMS_DIR,
    });
    if (choice.subnet === null) {
      if (config.enabled === "on") throw new Error(choice.reason);
      this.unavailable = choice.reason;
      log.warn({ reason: choice.reason }, "sandboxes get no network");
      return;
    }
    if (choice.skipped.length)
      log.warn({ pool: choice.subnet, skipped: choice.skipped }, `sandbox address pool ${choice.subnet}`);
    this.subnet = choice.subnet;
    this.releasePool = () => choice.release();
    this.upstreams = config.dnsUpstreams.length ? parseUpstreams(config.dnsUpstreams) : systemUpstreams();
    this.resolver = new DnsResolver({
      upstream: this.upstreams,
      clientFor: (addr) => this.clientFor(addr),
      ...(config.dnsRateLimit ? { rateLimit: config.dnsRateLimit } : {}),
      log: { warn: (o, m) => log.warn(o, m) },
    });
    const { udpPort } = await this.resolver.listen("0.0.0.0", 0);
    const stateFile = path.join(this.deps.dataDir, "network-host-state.json");
    const volumePorts = config.volumePorts ?? [];
    const manager = new NetworkManager({ tag, subnet: this.subnet, resolverPort: udpPort, stateFile, volumePorts });
    // Sandboxes that ended while the server was down give their slots back.
    const specs: SandboxNetSpec[] = [];
    for (const row of await store.listSlottedNetworks()) {
      if (opts.notMine?.has(row.sandbox_id)) continue;
      const sb = await store.getSandbox(row.sandbox_id);
      if (!sb || TERMINAL_STATUSES.includes(sb.status) || row.slot === null) {
        await store.releaseNetworkSlot(row.sandbox_id);
        continue;
      }
      const l = this.track(row, manager);
      await this.openTunnels(l).catch((err) => log.warn({ sandbox: row.sandbox_id, err: String(err) }, "tunnels not restored"));
      specs.push(l.spec);
    }
    await manager.init(specs).catch(async (err: unknown) => {
      // Half set up (forwarding, the table, taps): taken down before the failure goes on.
      await manager.destroy().catch(() => {});
      throw err;
    });
    this.manager = manager;
    this.unavailable = null;
    for (const l of this.live.values()) await this.markApplied(l, true);
    this.sweeper = setInterval(() => void this.sweep(), 30_000);
    this.sweeper.unref();
  }

  private track(row: NetworkRow, manager: NetworkManager): Live {
    const slot = manager.slot(row.slot as number);
    const l: Live = {
      row,
      spec: {
        sandboxId: row.sandbox_id,
        slot,
        tap: manager.tapName(slot.index),
        policy: { mode: row.mode, allow: row.allowlist, deny: row.denylist },
        tunnels: [],
        generation: row.generation,
        resolved: [],
      },
      learned: new Map(),
      denied: new Set(),
      proxies: [],
    };
    this.live.set(row.sandbox_id, l);
    this.byAddress.set(slot.address, l);
    return l;
  }

  /** The policy a create or update asks for. */
  /** Records what a create asked for (validated before the sandbox is admitted). */
  async register(sandboxId: string, params: NetworkParams): Promise<void> {
    const policy = egressPolicy(this.deps.config.defaultPolicy, params);
    await this.deps.store.putNetwork({
      sandbox_id: sandboxId,
      enabled: params.network,
      slot: null,
      mode: params.network ? policy.mode : "deny_all",
      allowlist: policy.allow,
      denylist: policy.deny,
      tunnels: params.tunnels ?? {},
      generation: 1,
      applied: false,
      updated_at: new Date().toISOString(),
    });
  }

  /** Checks a create's network fields before anything is stored; never drops an egress list or tunnel silently. */
  validate(params: {
    network_allowlist?: string[] | undefined;
    network_denylist?: string[] | undefined;
    tunnels?: Record<string, string> | undefined;
  }): void {
    egressPolicy(this.deps.config.defaultPolicy, params);
    const asked = (["network_allowlist", "network_denylist", "tunnels"] as const).filter(
      (f) => params[f] !== undefined && Object.keys(params[f] ?? {}).length > 0,
    );
    if (asked.length && !this.enabled) throw networkUnavailable(this.unavailable, asked);
  }

  /**
   * Before the sandbox's VM starts: its slot, tap, tunnels and rules. Returns the NIC to give
   * the VMM and the guest's eth0 setting ("-" keeps a `network: false` sandbox's link down);
   * null when this server gives sandboxes no NIC.
   */
  async attach(sandboxId: string): Promise<{ tap: string; guestNet: string } | null> {
    const manager = this.manager;
    if (!manager) return null;
    const { store } = this.deps;
    const row = await store.getNetwork(sandboxId);
    if (!row) throw new SandtreeError("INTERNAL", `sandbox ${sandboxId} has no network record`);
    const slot = await store.allocateNetworkSlot(sandboxId, slotCount(this.subnet));
    if (slot === null) {
      throw new SandtreeError("NETWORK_SETUP_FAILED", `the address pool ${this.subnet} is exhausted`);
    }
    row.slot = slot;
    const l = this.track(row, manager);
    try {
      await manager.createTap(l.spec.tap, l.spec.slot);
      await this.openTunnels(l);
      await manager.addRules(l.spec);
      this.refreshDenied(l);
    } catch (err) {
      await this.detach(sandboxId);
      throw new SandtreeError("NETWORK_SETUP_FAILED", `network setup failed: ${(err as Error).message}`);
    }
    await this.markApplied(l, true);
    const guestNet = row.enabled ? `${l.spec.slot.address}/${l.spec.slot.prefix} ${l.spec.slot.gateway}` : "-";
    return { tap: l.spec.tap, guestNet };
  }

  /** The sandbox's tap while it has one. */
  tapOf(sandboxId: string): string | undefined {
    return this.live.get(sandboxId)?.spec.tap;
  }

  /** What a fork's children inherit: the parent's network switch, policy and tunnels. */
  async inheritedParams(sandboxId: string): Promise<Partial<NetworkParams>> {
    const row = await this.deps.store.getNetwork(sandboxId);
    if (!row) return {};
    return {
      network: row.enabled,
      ...(row.mode === "allowlist" ? { network_allowlist: row.allowlist } : {}),
      ...(row.mode === "denylist" ? { network_denylist: row.denylist } : {}),
      ...(Object.keys(row.tunnels).length ? { tunnels: row.tunnels } : {}),
    };
  }

  /** For an adopted VM: the same eth0 setting it was started with. */
  guestNetOf(sandboxId: string): string | undefined {
    const l = this.live.get(sandboxId);
    if (!l) return undefined;
    return l.row.enabled ? `${l.spec.slot.address}/${l.spec.slot.prefix} ${l.spec.slot.gateway}` : "-";
  }

  /** Removes the sandbox's rules, tap and tunnels and frees its slot. Idempotent. */
  async detach(sandboxId: string): Promise<void> {
    const l = this.live.get(sandboxId);
    if (l) {
      this.live.delete(sandboxId);
      if (this.byAddress.get(l.spec.slot.address) === l) this.byAddress.delete(l.spec.slot.address);
      for (const p of l.proxies) p.close();
      await this.manager?.remove(l.spec.slot.index, l.spec.tap);
    }
    await this.deps.store.releaseNetworkSlot(sandboxId);
  }

  /** A tap for a template VM: no address and no rules, so everything it sends is dropped. */
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

  /** The sandbox's guest address when it has a network (the port proxy connects to it). */
  addressOf(sandboxId: string): string | null {
    const l = this.live.get(sandboxId);
    return l?.row.enabled ? l.spec.slot.address : null;
  }

  async view(sandboxId: string): Promise<SandboxNetwork> {
    const row = await this.deps.store.getNetwork(sandboxId);
    const l = this.live.get(sandboxId);
    const r = l?.row ?? row;
    return {
      sandbox_id: sandboxId,
      enabled: (r?.enabled ?? false) && this.enabled,
      address: l && r?.enabled ? l.spec.slot.address : null,
      gateway: l && r?.enabled ? l.spec.slot.gateway : null,
      mode: r?.mode ?? "deny_all",
      network_allowlist: r?.allowlist ?? [],
      network_denylist: r?.denylist ?? [],
      tunnels: Object.entries(r?.tunnels ?? {}).map(([name, target]) => ({
        name,
        hostname: `${name}.${LOCAL_DNS_SUFFIX}`,
        target,
      })),
      applied: (r?.applied ?? false) && l !== undefined,
      updated_at: r?.updated_at ?? new Date(0).toISOString(),
    };
  }

  /** Replaces a running sandbox's egress policy (one update at a time each); live connections are re-checked. */
  async update(sandboxId: string, body: UpdateNetworkRequest): Promise<SandboxNetwork> {
    // The row changes in one conditional update (generation + 1): updates from any servers never
    // lose each other's generation; applying to the live rules is serialized in this process.
    return this.updates.run(sandboxId, async () => {
      const policy = egressPolicy(this.deps.config.defaultPolicy, body);
      if (!this.enabled)
        throw networkUnavailable(this.unavailable, [body.network_denylist ? "network_denylist" : "network_allowlist"]);
      const row = await this.deps.store.updateNetworkPolicy(sandboxId, {
        mode: policy.mode,
        allowlist: policy.allow,
        denylist: policy.deny,
        updated_at: new Date().toISOString(),
      });
      if (!row) throw new SandtreeError("NETWORK_DISABLED", `sandbox ${sandboxId} has no network`, { id: sandboxId });
      const l = this.live.get(sandboxId);
      if (l) {
        l.row = row;
        l.spec.policy = { mode: row.mode, allow: row.allowlist, deny: row.denylist };
        l.spec.generation = row.generation;
        // Addresses learned for names the new policy no longer allows are forgotten.
        for (const name of [...l.learned.keys()]) {
          if (row.mode !== "allowlist" || !nameMatches(name, row.allowlist)) l.learned.delete(name);
        }
        l.denied.clear();
        l.spec.resolved = resolvedOf(l);
        await this.manager?.update(l.spec);
        await this.markApplied(l, true);
        this.refreshDenied(l);
      }
      return this.view(sandboxId);
    });
  }

  private async markApplied(l: Live, applied: boolean): Promise<void> {
    l.row.applied = applied;
    await this.deps.store.setNetworkApplied(l.row.sandbox_id, l.row.generation, applied);
  }

  /** Every 30 s: drops expired learned addresses; re-resolves denylisted names. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const l of this.live.values()) {
      if (l.row.mode === "denylist") this.refreshDenied(l);
      else if (expireLearned(l, now)) await this.applyResolved(l).catch(() => {});
    }
  }

  /** The resolver's view of the sandbox at `address` (null: unknown, or its network is off). */
  private clientFor(address: string): ResolverClient | null {
    const l = this.byAddress.get(address);
    return l?.row.enabled ? resolverClient(l, () => this.applyResolved(l)) : null;
  }

  /** Puts what the sandbox's hostname rules resolved to into its firewall rules. */
  private async applyResolved(l: Live): Promise<void> {
    l.spec.resolved = resolvedOf(l);
    await this.manager?.update(l.spec);
  }

  /** Denylisted hostnames resolved by the host, so connecting to their addresses directly is blocked too. */
  private refreshDenied(l: Live): void {
    resolveDenied(l, this.upstreams, () => this.live.get(l.row.sandbox_id) === l)
      .then((grew) => (grew ? this.applyResolved(l) : undefined))
      .catch((err) => this.deps.log.warn({ err: String(err) }, "denylist update failed"));
  }

  /** One TCP proxy per tunnel on the sandbox's gateway address; only the sandbox may connect. */
  private async openTunnels(l: Live): Promise<void> {
    l.spec.tunnels = [];
    await openTunnelProxies(l.spec, l.row.tunnels, l.proxies);
  }

  /** Stops the resolver and proxies; with `destroy` also removes every rule and tap (no VM is left). */
  async close(opts: { destroy: boolean }): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const l of this.live.values()) for (const p of l.proxies) p.close();
    await this.resolver?.close();
    if (opts.destroy) await this.manager?.destroy();
    this.manager = null;
    this.releasePool();
  }
}
