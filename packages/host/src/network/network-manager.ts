import { accessSync, constants, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { classifyNetworkRule, type NetworkMode } from "@sandtree/protocol";
import { removeTapRate } from "../limits/tap-rate.js";
import { runCommand } from "../util/run-command.js";
import { VOLUME_SERVER_ADDRESS } from "../volumes/guest-mount.js";
import { type SandboxSlot, slotOf } from "./addresses.js";

/**
 * The host side of sandbox networking: one tap device per sandbox (a /30 of the pool: the
 * host's end is the sandbox's gateway) and one nftables table per server holding every rule.
 *
 * Why taps in the server's namespace rather than a namespace per sandbox: the rules that
 * isolate a sandbox (no traffic to other sandboxes, the host or private ranges; egress policy;
 * DNS forced through our resolver; tunnels) are all nftables rules keyed on the tap, so one
 * table holds every sandbox's rules, a change is one atomic `nft -f` transaction, and the
 * tap's own address is the gateway (no veth pairs or routes per sandbox). Teardown deletes the
 * tap and the sandbox's chains; start-up rebuilds the whole table from the database and
 * deletes any tap of ours that no live sandbox owns, so a crash leaves nothing behind.
 *
 * Rules (table `inet <table>`):
 * - prerouting: UDP/TCP port 53 from a tap, to any address, is redirected to the resolver (so
 *   another DNS server cannot be used); tunnel addresses are DNATed to their host-side proxy.
 * - forward: nothing new enters a tap (sandboxes cannot reach each other; outside hosts cannot
 *   reach sandboxes); IPv6 is dropped; each tap jumps to its own chain: anti-spoofing, never
 *   loopback/link-local/multicast/the pool, then the egress policy. An accepted flow is marked
 *   with the policy's generation; established packets pass only while the mark is current,
 *   so a policy change re-checks live connections at their next packet.
 * - input: from a tap only the resolver, the sandbox's own tunnel proxies and the volume file
 *   server's ports (on its own gateway, reached at VOLUME_SERVER_ADDRESS by DNAT) are reachable;
 *   every other host service (the API, SSH, anything on 0.0.0.0) is dropped. The volume ports
 *   take nothing but loopback from outside the taps.
 * - postrouting: sandbox traffic leaving through another interface is masqueraded.
 */

/** Where guests may never go (loopback, link-local incl. cloud metadata, multicast, reserved). */
const NEVER = ["0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/3"];
/** Reached under allow_all or a denylist only when an allowlist names them explicitly. */
const IP_FORWARD = "/proc/sys/net/ipv4/ip_forward";
const PRIVATE = ["10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"];

export interface EgressPolicy {
  mode: NetworkMode;
  allow: string[];
  deny: string[];
}

export interface TunnelRule {
  /** Link-local address inside the sandbox (see tunnelAddress). */
  address: string;
  port: number;
  /** The server's proxy for this tunnel, listening on the sandbox's gateway address. */
  proxyPort: number;
}

export interface SandboxNetSpec {
  sandboxId: string;
  slot: SandboxSlot;
  tap: string;
  policy: EgressPolicy;
  tunnels: TunnelRule[];
  /** Bumped on every policy change (connection marks). */
  generation: number;
  /** Addresses allowed (allowlist) or denied (denylist) because of hostname rules. */
  resolved: string[];
}

export interface NetworkManagerOptions {
  /** Unique per server on one host: names the nftables table and prefixes tap devices. */
  tag: string;
  subnet: string;
  resolverPort: number;
  /** TCP ports of the volume file server (VolumeFileServer.ports), when this server has one. */
  volumePorts?: number[];
  /** Where what the host looked like before us (ip_forward) is kept across crashes. */
  stateFile?: string;
  log?: { warn(o: object, m: string): void };
}

/** The one argv runner; a failure is NETWORK_SETUP_FAILED with the command, exit code and stderr. */
async function run(cmd: string, args: string[], input?: string): Promise<string> {
  const opts = input === undefined ? {} : { input };
  return (await runCommand([cmd, ...args], { ...opts, errorCode: "NETWORK_SETUP_FAILED" })).stdout;
}

/** Why this host cannot give sandboxes a network, or null when it can. */
export async function networkUnavailableReason(): Promise<string | null> {
  if (process.getuid && process.getuid() !== 0) return "the server is not running as root";
  try {
    accessSync("/dev/net/tun", constants.R_OK | constants.W_OK);
  } catch {
    return "/dev/net/tun is missing";
  }
  for (const [bin, flag] of [
    ["nft", "-v"],
    ["ip", "-V"],
  ] as const) {
    const found = await runCommand([bin, flag]).then(
      () => true,
      () => false,
    );
    if (!found) return `the '${bin}' command is missing (install nftables and iproute2)`;
  }
  return null;
}

function elements(items: string[]): string {
  return items.length ? `{ ${items.join(", ")} }` : "";
}

export class NetworkManager {
  readonly table: string;
  readonly tapPrefix: string;
  private queue: Promise<unknown> = Promise.resolve();
  /** Rule adds waiting for the next nft transaction (see addRules). */
  private pendingAdds: Array<{ spec: SandboxNetSpec; resolve: () => void; reject: (err: unknown) => void }> = [];
  private enabledForwarding = false;

  constructor(private readonly opts: NetworkManagerOptions) {
    if (!/^[a-z0-9]{1,6}$/.test(opts.tag)) throw new RangeError("network tag: 1-6 of a-z0-9");
    this.table = `sandtree_${opts.tag}`;
    this.tapPrefix = `st${opts.tag}-`;
  }

  /** The volume file server's ports as an nft set, or null without one. */
  private get volumePorts(): string | null {
    const ports = this.opts.volumePorts ?? [];
    return ports.length ? `{ ${ports.join(", ")} }` : null;
  }

  tapName(index: number): string {
    return `${this.tapPrefix}${index.toString(36)}`;
  }

  slot(index: number): SandboxSlot {
    return slotOf(this.opts.subnet, index);
  }

  /** nft and ip calls run one at a time: each transaction sees the previous one's result. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => {});
    return next;
  }

  private nft(script: string): Promise<string> {
    return run("nft", ["-f", "-"], script);
  }

  /**
   * Enables forwarding, deletes taps of ours that no live sandbox owns, and rebuilds the whole
   * table (base chains and every live sandbox's chains) in one transaction.
   */
  async init(live: SandboxNetSpec[]): Promise<void> {
    // Forwarding is turned on for sandboxes and back off at destroy() if it was off before we
    // (or an earlier run of this server that crashed) turned it on: remembered in stateFile.
    let before = readFileSync(IP_FORWARD, "utf8").trim();
    if (this.opts.stateFile) {
      try {
        before = (JSON.parse(readFileSync(this.opts.stateFile, "utf8")) as { ipForwardBefore: string }).ipForwardBefore;
      } catch {
        writeFileSync(this.opts.stateFile, JSON.stringify({ ipForwardBefore: before }));
      }
    }
    this.enabledForwarding = before !== "1";
    writeFileSync(IP_FORWARD, "1");
    const keep = new Set(live.map((s) => s.tap));
    for (const tap of this.ourTaps()) {
      if (!keep.has(tap)) await run("ip", ["link", "del", tap]).catch(() => {});
    }
    await this.serial(async () => {
      const exists = await run("nft", ["list", "table", "inet", this.table]).then(
        () => true,
        () => false,
      );
      const lines = [exists ? `delete table inet ${this.table}` : "", ...this.baseRules()];
      for (const s of live) lines.push(...this.sandboxRules(s, true));
      await this.nft(lines.join("\n"));
    });
  }

  /** Taps with our prefix that exist now. */
  ourTaps(): string[] {
    if (!existsSync("/sys/class/net")) return [];
    return readdirSync("/sys/class/net").filter((n) => n.startsWith(this.tapPrefix));
  }

  private baseRules(): string[] {
    const t = this.table;
    const taps = `"${this.tapPrefix}*"`;
    const p = this.opts.resolverPort;
    return [
      `add table inet ${t}`,
      `add set inet ${t} never { type ipv4_addr; flags interval; auto-merge; elements = ${elements([...NEVER, this.opts.subnet])}; }`,
      `add set inet ${t} private { type ipv4_addr; flags interval; auto-merge; elements = ${elements(PRIVATE)}; }`,
      `add map inet ${t} tapfwd { type ifname : verdict; }`,
      `add map inet ${t} tapin { type ifname : verdict; }`,
      `add map inet ${t} tappre { type ifname : verdict; }`,
      `add chain inet ${t} prerouting { type nat hook prerouting priority dstnat; policy accept; }`,
      `add rule inet ${t} prerouting iifname ${taps} meta l4proto { tcp, udp } th dport 53 redirect to :${p}`,
      `add rule inet ${t} prerouting iifname ${taps} iifname vmap @tappre`,
      `add chain inet ${t} postrouting { type nat hook postrouting priority srcnat; policy accept; }`,
      `add rule inet ${t} postrouting iifname ${taps} oifname != ${taps} masquerade`,
      `add chain inet ${t} forward { type filter hook forward priority filter - 10; policy accept; }`,
      `add rule inet ${t} forward oifname ${taps} ct state established,related accept`,
      `add rule inet ${t} forward oifname ${taps} drop`,
      `add rule inet ${t} forward iifname ${taps} meta nfproto ipv6 drop`,
      `add rule inet ${t} forward iifname ${taps} iifname vmap @tapfwd`,
      `add rule inet ${t} forward iifname ${taps} drop`,
      `add chain inet ${t} input { type filter hook input priority filter - 10; policy accept; }`,
      // The resolver serves sandboxes only.
      `add rule inet ${t} input iifname != ${taps} meta l4proto { tcp, udp } th dport ${p} drop`,
      ...(this.volumePorts
        ? [`add rule inet ${t} input iifname != ${taps} iifname != "lo" tcp dport ${this.volumePorts} drop`]
        : []),
      `add rule inet ${t} input iifname ${taps} meta nfproto ipv6 drop`,
      `add rule inet ${t} input iifname ${taps} ct state established,related accept`,
      `add rule inet ${t} input iifname ${taps} iifname vmap @tapin`,
      `add rule inet ${t} input iifname ${taps} drop`,
    ];
  }

  /** The sandbox's chains and sets, created (`fresh`) or replaced in place. */
  private sandboxRules(s: SandboxNetSpec, fresh: boolean): string[] {
    const t = this.table;
    const i = s.slot.index;
    const { address: guest, gateway } = s.slot;
    const gen = s.generation >>> 0;
    const lines: string[] = [];
    if (fresh) {
      lines.push(
        `add set inet ${t} sba${i} { type ipv4_addr; flags interval; auto-merge; }`,
        `add chain inet ${t} sbf${i}`,
        `add chain inet ${t} sbi${i}`,
        `add chain inet ${t} sbp${i}`,
        `add element inet ${t} tapfwd { "${s.tap}" : jump sbf${i} }`,
        `add element inet ${t} tapin { "${s.tap}" : jump sbi${i} }`,
        `add element inet ${t} tappre { "${s.tap}" : jump sbp${i} }`,
      );
    } else {
      lines.push(
        `flush chain inet ${t} sbf${i}`,
        `flush chain inet ${t} sbi${i}`,
        `flush chain inet ${t} sbp${i}`,
        `flush set inet ${t} sba${i}`,
      );
    }
    const { mode } = s.policy;
    // a<i>: addresses the policy names (allowlist: allowed; denylist: denied), explicit and resolved.
    const listed = mode === "allowlist" ? s.policy.allow : mode === "denylist" ? s.policy.deny : [];
    const addrs = [
      ...listed.filter((r) => {
        const k = classifyNetworkRule(r);
        return k === "ip" || k === "cidr";
      }),
      ...s.resolved,
    ];
    if (addrs.length) lines.push(`add element inet ${t} sba${i} ${elements(addrs)}`);
    const f = `add rule inet ${t} sbf${i}`;
    lines.push(
      `${f} ip saddr != ${guest} drop`,
      `${f} ip daddr @never drop`,
      `${f} ct state established,related ct mark ${gen} accept`,
    );
    if (mode === "allowlist") {
      lines.push(`${f} ip daddr @sba${i} ct mark set ${gen} accept`, `${f} drop`);
    } else if (mode === "deny_all") {
      lines.push(`${f} drop`);
    } else {
      if (mode === "denylist") lines.push(`${f} ip daddr @sba${i} drop`);
      lines.push(`${f} ip daddr @private drop`, `${f} ct mark set ${gen} accept`);
    }
    const inp = `add rule inet ${t} sbi${i}`;
    lines.push(`${inp} ip saddr != ${guest} drop`, `${inp} meta l4proto { tcp, udp } th dport ${this.opts.resolverPort} accept`);
    for (const tun of s.tunnels) {
      lines.push(`${inp} ip daddr ${gateway} tcp dport ${tun.proxyPort} accept`);
      lines.push(
        `add rule inet ${t} sbp${i} ip daddr ${tun.address} tcp dport ${tun.port} dnat ip to ${gateway}:${tun.proxyPort}`,
      );
    }
    if (this.volumePorts) {
      lines.push(`${inp} ip daddr ${gateway} tcp dport ${this.volumePorts} accept`);
      lines.push(
        `add rule inet ${t} sbp${i} ip daddr ${VOLUME_SERVER_ADDRESS} tcp dport ${this.volumePorts} dnat ip to ${gateway}`,
      );
    }
    lines.push(`${inp} drop`);
    return lines;
  }

  /** Creates a tap whose address is the slot's gateway (no rules yet: everything is dropped). */
  async createTap(tap: string, slot: SandboxSlot | null): Promise<void> {
    if (existsSync(`/sys/class/net/${tap}`)) await run("ip", ["link", "del", tap]).catch(() => {});
    await run(
      "ip",
      ["-batch", "-"],
      [
        `tuntap add dev ${tap} mode tap`,
        ...(slot ? [`addr add ${slot.gateway}/${slot.prefix} dev ${tap}`] : []),
        `link set ${tap} up`,
        "",
      ].join("\n"),
    );
    try {
      writeFileSync(`/proc/sys/net/ipv6/conf/${tap}/disable_ipv6`, "1");
    } catch {}
  }

  async deleteTap(tap: string): Promise<void> {
    if (existsSync(`/sys/class/net/${tap}`)) await run("ip", ["link", "del", tap]).catch(() => {});
    await removeTapRate(tap);
  }

  /**
   * Adds the sandbox's rules (its tap exists). Adds that wait while another nft call runs go
   * together in one transaction (a burst of creates pays one nft run, not one each against a
   * growing ruleset); if that transaction fails, each is added on its own.
   */
  addRules(s: SandboxNetSpec): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pendingAdds.push({ spec: s, resolve, reject });
      if (this.pendingAdds.length === 1) void this.serial(() => this.flushAdds());
    });
  }

  private async flushAdds(): Promise<void> {
    const batch = this.pendingAdds.splice(0);
    if (batch.length > 1) {
      const ok = await this.nft(batch.map((b) => this.sandboxRules(b.spec, true).join("\n")).join("\n")).then(
        () => true,
        () => false,
      );
      if (ok) {
        for (const b of batch) b.resolve();
        return;
      }
    }
    for (const b of batch) {
      const script = this.sandboxRules(b.spec, true).join("\n");
      // Leftovers of an interrupted teardown of the same slot make the first try fail.
      await this.nft(script)
        .catch(async () => {
          await this.removeRules(b.spec.slot.index, b.spec.tap);
          await this.nft(script);
        })
        .then(b.resolve, b.reject);
    }
  }

  /** Replaces the sandbox's policy, tunnels and resolved addresses in one transaction. */
  async update(s: SandboxNetSpec): Promise<void> {
    await this.serial(() => this.nft(this.sandboxRules(s, false).join("\n")));
  }

  private async removeRules(index: number, tap: string): Promise<void> {
    const t = this.table;
    const stmts = [
      `delete element inet ${t} tapfwd { "${tap}" }`,
      `delete element inet ${t} tapin { "${tap}" }`,
      `delete element inet ${t} tappre { "${tap}" }`,
      `delete chain inet ${t} sbf${index}`,
      `delete chain inet ${t} sbi${index}`,
      `delete chain inet ${t} sbp${index}`,
      `delete set inet ${t} sba${index}`,
    ];
    // One transaction; when some object is already gone, each statement alone.
    await this.nft(stmts.join("\n")).catch(async () => {
      for (const stmt of stmts) await this.nft(stmt).catch(() => {});
    });
  }

  /** Removes the sandbox's rules and tap. Idempotent. */
  async remove(index: number, tap: string): Promise<void> {
    await this.serial(() => this.removeRules(index, tap));
    await this.deleteTap(tap);
  }

  /** Removes the whole table and every tap of ours (server shutdown with no VM left). */
  async destroy(): Promise<void> {
    await this.serial(() => this.nft(`delete table inet ${this.table}`).catch(() => {}));
    for (const tap of this.ourTaps()) await this.deleteTap(tap);
    if (this.enabledForwarding) {
      // Only when no other sandtree server on this host still needs it.
      const tables = await run("nft", ["list", "tables"]).catch(() => "sandtree_");
      if (!tables.includes("sandtree_")) writeFileSync(IP_FORWARD, "0");
      this.enabledForwarding = false;
    }
    if (this.opts.stateFile) rmSync(this.opts.stateFile, { force: true });
  }
}
