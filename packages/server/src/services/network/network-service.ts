import type { HostNetworks, NetworkAttachment, SandboxNetworkSpec, TemplateTaps } from "@sandtree/host";
import { LOCAL_DNS_SUFFIX, slotCount } from "@sandtree/host";
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
import { egressPolicy, networkUnavailable } from "./egress-policy.js";

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
}

/** A sandbox's network while it is live on the host: its record and where the host put it. */
interface Live {
  row: NetworkRow;
  at: NetworkAttachment;
}

/** What the host needs of a network record. */
function specOf(row: NetworkRow): SandboxNetworkSpec {
  return {
    sandboxId: row.sandbox_id,
    slot: row.slot as number,
    enabled: row.enabled,
    policy: { mode: row.mode, allow: row.allowlist, deny: row.denylist },
    tunnels: row.tunnels,
    generation: row.generation,
  };
}

/**
 * Sandbox networks, the control plane's part: each sandbox's record (policy, tunnels, slot,
 * generation, whether the host applied it), validation and views. The host's networks
 * (MachineHost.networks) hold the rest: the pool, taps, firewall rules, DNS and tunnels.
 */
export class NetworkService {
  /** Live networks by sandbox id. */
  private readonly live = new Map<string, Live>();
  private readonly updates = new KeyedSerial();
  private opened = false;
  /** The address pool in use (once started with networks). */
  subnet = "";
  /** Why sandboxes get no network on this server (null: they do). */
  unavailable: string | null = "not started";

  constructor(
    private readonly deps: { store: Store; log: Logger; dataDir: string; config: NetworkConfig; networks: HostNetworks },
  ) {}

  get enabled(): boolean {
    return this.opened;
  }

  /**
   * Opens the host's networks with the sandboxes still active. `notMine`: the sandboxes another
   * server runs (a peer control plane on a shared database), left alone: no rules, tunnels or
   * taps here, and their slots are not released.
   */
  async start(opts: { notMine?: ReadonlySet<string> } = {}): Promise<void> {
    const { config, log, store, networks } = this.deps;
    if (config.enabled === "off") {
      this.unavailable = "networking is turned off in the server's configuration";
      return;
    }
    // Sandboxes that ended while the server was down give their slots back.
    const rows: NetworkRow[] = [];
    for (const row of await store.listSlottedNetworks()) {
      if (opts.notMine?.has(row.sandbox_id)) continue;
      const sb = await store.getSandbox(row.sandbox_id);
      if (!sb || TERMINAL_STATUSES.includes(sb.status) || row.slot === null) {
        await store.releaseNetworkSlot(row.sandbox_id);
        continue;
      }
      rows.push(row);
    }
    const opened = await networks.open({
      dataDir: this.deps.dataDir,
      subnet: config.subnet,
      enabled: config.enabled,
      dnsUpstreams: config.dnsUpstreams,
      dnsRateLimit: config.dnsRateLimit,
      live: rows.map(specOf),
    });
    if (opened.subnet === null) {
      this.unavailable = opened.unavailable;
      log.warn({ reason: opened.unavailable }, "sandboxes get no network");
      return;
    }
    if (opened.skipped.length)
      log.warn({ pool: opened.subnet, skipped: opened.skipped }, `sandbox address pool ${opened.subnet}`);
    this.subnet = opened.subnet;
    const byId = new Map(rows.map((r) => [r.sandbox_id, r]));
    for (const at of opened.attached) {
      const row = byId.get(at.sandboxId);
      if (row) this.live.set(at.sandboxId, { row, at });
    }
    this.opened = true;
    this.unavailable = null;
    for (const l of this.live.values()) await this.markApplied(l.row, true);
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
    if (!this.opened) return null;
    const { store, networks } = this.deps;
    const row = await store.getNetwork(sandboxId);
    if (!row) throw new SandtreeError("INTERNAL", `sandbox ${sandboxId} has no network record`);
    const slot = await store.allocateNetworkSlot(sandboxId, slotCount(this.subnet));
    if (slot === null) {
      throw new SandtreeError("NETWORK_SETUP_FAILED", `the address pool ${this.subnet} is exhausted`);
    }
    row.slot = slot;
    let at: NetworkAttachment;
    try {
      at = await networks.attach(specOf(row));
    } catch (err) {
      // The host undid its part: the slot goes back.
      await this.detach(sandboxId);
      throw err;
    }
    const l: Live = { row, at };
    this.live.set(sandboxId, l);
    await this.markApplied(l.row, true);
    return { tap: at.tap, guestNet: at.guestNet };
  }

  /** The sandbox's tap while it has one. */
  tapOf(sandboxId: string): string | undefined {
    return this.live.get(sandboxId)?.at.tap;
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
    return this.live.get(sandboxId)?.at.guestNet;
  }

  /** Removes the sandbox's rules, tap and tunnels and frees its slot. Idempotent. */
  async detach(sandboxId: string): Promise<void> {
    this.live.delete(sandboxId);
    // Also while its attach is still in progress (the host tracks it from the attach's start).
    if (this.opened) await this.deps.networks.detach(sandboxId);
    await this.deps.store.releaseNetworkSlot(sandboxId);
  }

  /** A tap for a template VM: no address and no rules, so everything it sends is dropped (the host's). */
  get taps(): TemplateTaps {
    return this.deps.networks.taps;
  }

  /** Whether the sandbox is attached with its network on (exposing its ports needs it). */
  hasNetwork(sandboxId: string): boolean {
    return this.live.get(sandboxId)?.row.enabled === true;
  }

  async view(sandboxId: string): Promise<SandboxNetwork> {
    const row = await this.deps.store.getNetwork(sandboxId);
    const l = this.live.get(sandboxId);
    const r = l?.row ?? row;
    return {
      sandbox_id: sandboxId,
      enabled: (r?.enabled ?? false) && this.enabled,
      address: l && r?.enabled ? l.at.address : null,
      gateway: l && r?.enabled ? l.at.gateway : null,
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
      // The host ignores a sandbox it has no network of; it has one from its attach's start on.
      const next = specOf(row);
      await this.deps.networks.update(sandboxId, { policy: next.policy, generation: next.generation });
      const l = this.live.get(sandboxId);
      if (l) {
        l.row = row;
        await this.markApplied(l.row, true);
      }
      return this.view(sandboxId);
    });
  }

  private async markApplied(row: NetworkRow, applied: boolean): Promise<void> {
    row.applied = applied;
    await this.deps.store.setNetworkApplied(row.sandbox_id, row.generation, applied);
  }

  /** Closes the host's networks; with `destroy` every rule and tap goes too (no VM is left). */
  async close(opts: { destroy: boolean }): Promise<void> {
    // Also after a failed open: the host gives back what it took (the pool's claim).
    this.opened = false;
    await this.deps.networks.close(opts);
  }
}
