/**
 * The one DNS resolver every sandbox talks to. nftables redirects all of a sandbox's DNS
 * (UDP and TCP port 53, any destination) here; the source IPv4 address (unique per sandbox,
 * anti-spoofed) says which sandbox asks. The resolver enforces the sandbox's egress policy on
 * names and reports which addresses allowed names resolved to, so hostname rules follow what
 * the sandbox was told, and denied names never reach upstream (no tunnelling through them).
 *
 * Decisions (security-relevant ones first):
 * - Denied names get NXDOMAIN without any upstream query, whatever the type.
 * - Query names must be made of letters, digits, '-' and '_' (REFUSED otherwise), so what the
 *   policy sees is exactly what upstream sees (a label with a dot in it cannot pass for two).
 * - The upstream query is rebuilt from the parsed question (fresh random ID, fresh socket per
 *   query, RD set, the client's CD bit, an OPT record only when the client sent one, with no
 *   options): nothing else the guest sent travels upstream. Case is kept (0x20 clients check it).
 * - CNAME chains: only the queried name is checked against the policy; a CNAME from an allowed
 *   name to a name the policy does not list is followed (the rule is on the name the sandbox
 *   asked for; CDNs CNAME allowed names into their own domains, which an allowlist would
 *   otherwise have to list). The chain's A addresses are learned for the queried name.
 * - `learned()` gets every A address owned by the queried name or a name in its CNAME chain
 *   (answer section only), with the smallest TTL among those records and the chain's CNAMEs
 *   (possibly 0: the firewall decides any grace period). The reply waits for it; if it
 *   rejects (or takes longer than the timeout) the client gets SERVFAIL.
 * - AAAA for allowed names: NOERROR with no records, not forwarded (sandboxes have no IPv6
 *   route). Forwarded types: A, CNAME, NS, SOA, PTR, MX, TXT, SRV. Other ordinary types get
 *   NOERROR with no records (HTTPS/SVCB address hints would bypass learning); ANY, zone
 *   transfers and other meta types get REFUSED; classes other than IN get REFUSED.
 * - `<name>.sandtree.internal`: answered from `local()` (A, TTL 5, authoritative), never
 *   forwarded and not reported to `learned()`; other types NOERROR-empty; unknown NXDOMAIN.
 * - Malformed queries: dropped when the header does not parse or QR is set (never answer an
 *   answer: no reflection loops); FORMERR otherwise. QDCOUNT != 1, answer/authority records,
 *   or additional records other than one OPT are FORMERR. Non-QUERY opcodes are NOTIMP.
 * - Per-source token bucket (default 200/s, burst 400; the server's `SANDTREE_DNS_RATE`):
 *   REFUSED beyond it. Upstream queries in flight are capped globally (256) and per source
 *   (64): SERVFAIL beyond that.
 * - UDP replies never exceed 512 octets, or the client's EDNS0 size clamped to 512..1232;
 *   a longer answer is cut to header + question (+ OPT) with TC set, and the client retries
 *   over TCP.
 * - Upstream: the first server, then one retry on the next (timeout each). UDP, or TCP when
 *   the client came over TCP or the UDP answer was truncated. Only answers from the server's
 *   address and port (connected socket) with our ID, QR set and the same question are taken.
 * - TCP: 2-octet length prefix, pipelined queries answered as they complete (RFC 7766), at most
 *   16 in progress per connection (reading pauses beyond that), 10 s idle timeout, at most 16
 *   connections per source and 1024 in all.
 */

import dgram from "node:dgram";
import net from "node:net";
import {
  DNS_HEADER_BYTES,
  DnsClass,
  DnsFormatError,
  type DnsMessage,
  DnsRcode,
  type DnsRecordInput,
  DnsType,
  isHostnameLabels,
  parseHeader,
  parseMessage,
} from "./dns-message.js";
import { SourceRateLimit } from "./dns-rate.js";
import { chainAddresses, fitReply, localReply, plainAddress, type Query, udpLimit } from "./dns-replies.js";
import { serveTcpConnection } from "./dns-tcp.js";
import { askUpstream, type DnsUpstream, type UpstreamAnswer, withTimeout } from "./dns-upstream.js";

// Re-exported so that `@sandtree/host` exports exactly what it did before the split.
export { chainAddresses, nameMatches } from "./dns-replies.js";
export { type DnsUpstream, systemUpstreams } from "./dns-upstream.js";

export interface ResolverClient {
  /** "allow": forward and learn; "deny": answer NXDOMAIN (never forwarded upstream). */
  decide(name: string): "allow" | "deny";
  /** A-record addresses an allowed name resolved to (after following CNAMEs), with the TTL in seconds. */
  learned(name: string, addresses: string[], ttlSeconds: number): void | Promise<void>;
  /** Local names: `<tunnel>.sandtree.internal` -> IPv4 answered directly (TTL 5), never forwarded. */
  local(name: string): string | null;
}

export interface DnsResolverOptions {
  upstream: DnsUpstream[];
  /** The client for a source IPv4 address, or null for an unknown one (REFUSED). */
  clientFor: (srcAddress: string) => ResolverClient | null;
  log?: { warn(o: object, m: string): void };
  /** Per upstream attempt; default 2000 ms. Also bounds how long `learned()` may take. */
  timeoutMs?: number;
  /** Per source address; default 200 queries/s with bursts of 400. */
  rateLimit?: { perSecond: number; burst: number };
  /** Default 256 in all, 64 per source. */
  maxUpstreamInFlight?: number;
  maxUpstreamInFlightPerSource?: number;
  /** TCP idle timeout; default 10 s. */
  tcpIdleMs?: number;
}

export const LOCAL_DNS_SUFFIX = "sandtree.internal";
const LOCAL_TTL = 5;
const FORWARDED_TYPES: ReadonlySet<number> = new Set([
  DnsType.A,
  DnsType.CNAME,
  DnsType.NS,
  DnsType.SOA,
  DnsType.PTR,
  DnsType.MX,
  DnsType.TXT,
  DnsType.SRV,
]);
const TCP_MAX_PER_SOURCE = 16;
const TCP_MAX_CONNECTIONS = 1024;

export class DnsResolver {
  private readonly upstream: DnsUpstream[];
  private readonly clientFor: (srcAddress: string) => ResolverClient | null;
  private readonly log: { warn(o: object, m: string): void } | undefined;
  private readonly timeoutMs: number;
  private readonly rate: SourceRateLimit;
  private readonly maxInFlight: number;
  private readonly maxInFlightPerSource: number;
  private readonly tcpIdleMs: number;

  private udp: dgram.Socket | null = null;
  private tcp: net.Server | null = null;
  private closed = false;
  private inFlight = 0;
  private readonly inFlightBySource = new Map<string, number>();
  private readonly tcpBySource = new Map<string, number>();
  private readonly sockets = new Set<net.Socket>();
  /** Cancels every upstream exchange in progress (used by close()). */
  private readonly cancels = new Set<() => void>();
  private readonly lastWarn = new Map<string, number>();

  constructor(opts: DnsResolverOptions) {
    this.upstream = opts.upstream.slice();
    this.clientFor = opts.clientFor;
    this.log = opts.log;
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.rate = new SourceRateLimit(opts.rateLimit?.perSecond ?? 200, opts.rateLimit?.burst ?? 400);
    this.maxInFlight = opts.maxUpstreamInFlight ?? 256;
    this.maxInFlightPerSource = opts.maxUpstreamInFlightPerSource ?? 64;
    this.tcpIdleMs = opts.tcpIdleMs ?? 10_000;
  }

  /** Listens on UDP and TCP; port 0 picks a free port, the same one for both when possible. */
  async listen(host: string, port = 0): Promise<{ udpPort: number; tcpPort: number }> {
    if (this.udp || this.tcp) throw new Error("DnsResolver is already listening");
    if (this.closed) throw new Error("DnsResolver is closed");
    const tries = port === 0 ? 8 : 1;
    for (let i = 0; ; i++) {
      const udp = await this.bindUdp(host, port);
      const udpPort = udp.address().port;
      try {
        const tcp = await this.bindTcp(host, udpPort);
        this.udp = udp;
        this.tcp = tcp;
        return { udpPort, tcpPort: (tcp.address() as net.AddressInfo).port };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || port !== 0) {
          udp.close();
          throw err;
        }
        if (i + 1 < tries) {
          udp.close();
          continue;
        }
        // Could not get the same number: take any TCP port.
        const tcp = await this.bindTcp(host, 0);
        this.udp = udp;
        this.tcp = tcp;
        return { udpPort, tcpPort: (tcp.address() as net.AddressInfo).port };
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const cancel of [...this.cancels]) cancel();
    for (const s of this.sockets) s.destroy();
    const udp = this.udp;
    const tcp = this.tcp;
    this.udp = null;
    this.tcp = null;
    await Promise.all([
      udp ? new Promise<void>((resolve) => udp.close(() => resolve())) : undefined,
      tcp ? new Promise<void>((resolve) => tcp.close(() => resolve())) : undefined,
    ]);
  }

  private bindUdp(host: string, port: number): Promise<dgram.Socket> {
    return new Promise((resolve, reject) => {
      // A large receive buffer (the kernel caps it at net.core.rmem_max): one sandbox's burst
      // must reach the rate limiter, not fill the queue the other sandboxes' queries wait in.
      const sock = dgram.createSocket({ type: net.isIPv6(host) ? "udp6" : "udp4", recvBufferSize: 4 << 20 });
      const onError = (err: Error) => {
        sock.close();
        reject(err);
      };
      sock.once("error", onError);
      sock.bind(port, host, () => {
        sock.off("error", onError);
        sock.on("error", (err) => this.warn("udp", { err: String(err) }, "dns resolver: UDP socket error"));
        sock.on("message", (msg, rinfo) => this.onUdpMessage(sock, msg, rinfo));
        resolve(sock);
      });
    });
  }

  private bindTcp(host: string, port: number): Promise<net.Server> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((socket) => this.onTcpConnection(socket));
      const onError = (err: Error) => {
        server.close();
        reject(err);
      };
      server.once("error", onError);
      server.listen({ host, port, exclusive: true }, () => {
        server.off("error", onError);
        server.on("error", (err) => this.warn("tcp", { err: String(err) }, "dns resolver: TCP server error"));
        resolve(server);
      });
    });
  }

  private onUdpMessage(sock: dgram.Socket, msg: Buffer, rinfo: dgram.RemoteInfo): void {
    const src = plainAddress(rinfo.address);
    this.handle(msg, src, "udp").then(
      (reply) => {
        if (!reply || this.closed || this.udp !== sock) return;
        try {
          sock.send(reply, rinfo.port, rinfo.address);
        } catch {
          // Socket closed underneath us.
        }
      },
      (err: unknown) => this.warn("handler", { err: String(err) }, "dns resolver: query failed"),
    );
  }

  private onTcpConnection(socket: net.Socket): void {
    const src = plainAddress(socket.remoteAddress ?? "");
    const perSource = this.tcpBySource.get(src) ?? 0;
    if (this.closed || this.sockets.size >= TCP_MAX_CONNECTIONS || perSource >= TCP_MAX_PER_SOURCE) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    this.tcpBySource.set(src, perSource + 1);
    serveTcpConnection(socket, this.tcpIdleMs, (msg) =>
      this.handle(msg, src, "tcp").catch((err: unknown) => {
        this.warn("handler", { err: String(err) }, "dns resolver: query failed");
        return null;
      }),
    );
    socket.on("close", () => {
      this.sockets.delete(socket);
      const n = (this.tcpBySource.get(src) ?? 1) - 1;
      if (n <= 0) this.tcpBySource.delete(src);
      else this.tcpBySource.set(src, n);
    });
  }

  /** One query in, the reply out (null: drop). Never throws. */
  private async handle(msg: Buffer, src: string, transport: "udp" | "tcp"): Promise<Buffer | null> {
    try {
      return await this.answer(msg, src, transport);
    } catch (err) {
      this.warn("internal", { err: String(err) }, "dns resolver: internal error answering a query");
      try {
        const header = parseHeader(msg);
        return header.qr ? null : localReply(header, null, null, DnsRcode.SERVFAIL);
      } catch {
        return null;
      }
    }
  }

  private async answer(msg: Buffer, src: string, transport: "udp" | "tcp"): Promise<Buffer | null> {
    if (this.closed || msg.length < DNS_HEADER_BYTES) return null;
    const header = parseHeader(msg);
    if (header.qr) return null;
    const token = this.rate.take(src);
    if (token === null) return null;
    const limited = !token;

    let parsed: DnsMessage;
    try {
      parsed = parseMessage(msg);
    } catch (err) {
      if (err instanceof DnsFormatError) return localReply(header, null, null, DnsRcode.FORMERR);
      throw err;
    }
    const question = parsed.header.qdcount === 1 ? (parsed.questions[0] ?? null) : null;
    const edns = parsed.edns;
    if (limited) return localReply(header, question, edns, DnsRcode.REFUSED);
    if (header.opcode !== 0) return localReply(header, question, edns, DnsRcode.NOTIMP);
    if (
      !question ||
      header.ancount !== 0 ||
      header.nscount !== 0 ||
      parsed.additionals.length !== 0 ||
      (edns !== null && edns.version !== 0)
    ) {
      return localReply(header, question, edns, DnsRcode.FORMERR);
    }
    const client = this.clientFor(src);
    if (!client) return localReply(header, question, edns, DnsRcode.REFUSED);
    const q: Query = { header, question, edns };
    const limit = transport === "tcp" ? 0xffff : udpLimit(edns);
    const reply = await this.resolve(q, client, src, transport);
    return fitReply(reply, q, limit);
  }

  private async resolve(q: Query, client: ResolverClient, src: string, transport: "udp" | "tcp"): Promise<Buffer> {
    const { question } = q;
    if (question.class !== DnsClass.IN) return localReply(q.header, question, q.edns, DnsRcode.REFUSED);
    if (question.type === 0 || question.type === DnsType.OPT || (question.type >= 128 && question.type <= 255)) {
      return localReply(q.header, question, q.edns, DnsRcode.REFUSED);
    }
    if (!isHostnameLabels(question.labels)) return localReply(q.header, question, q.edns, DnsRcode.REFUSED);
    const name = question.name.toLowerCase();

    if (name === LOCAL_DNS_SUFFIX || name.endsWith("." + LOCAL_DNS_SUFFIX)) {
      const address = client.local(name);
      if (address === null || !net.isIPv4(address)) {
        return localReply(q.header, question, q.edns, DnsRcode.NXDOMAIN, { aa: true });
      }
      const answers: DnsRecordInput[] =
        question.type === DnsType.A ? [{ name: question.name, type: DnsType.A, ttl: LOCAL_TTL, data: address }] : [];
      return localReply(q.header, question, q.edns, DnsRcode.NOERROR, { aa: true, answers });
    }

    if (client.decide(name) !== "allow") return localReply(q.header, question, q.edns, DnsRcode.NXDOMAIN);
    if (!FORWARDED_TYPES.has(question.type)) return localReply(q.header, question, q.edns, DnsRcode.NOERROR);

    if (this.inFlight >= this.maxInFlight || (this.inFlightBySource.get(src) ?? 0) >= this.maxInFlightPerSource) {
      return localReply(q.header, question, q.edns, DnsRcode.SERVFAIL);
    }
    this.inFlight++;
    this.inFlightBySource.set(src, (this.inFlightBySource.get(src) ?? 0) + 1);
    let upstream: UpstreamAnswer;
    try {
      upstream = await askUpstream(
        this.upstream,
        q,
        transport,
        { timeoutMs: this.timeoutMs, cancels: this.cancels },
        () => this.closed,
      );
    } catch (err) {
      this.warn("upstream", { err: String(err) }, "dns resolver: no upstream answer");
      return localReply(q.header, question, q.edns, DnsRcode.SERVFAIL);
    } finally {
      this.inFlight--;
      const n = (this.inFlightBySource.get(src) ?? 1) - 1;
      if (n <= 0) this.inFlightBySource.delete(src);
      else this.inFlightBySource.set(src, n);
    }

    if (upstream.msg.header.rcode === DnsRcode.NOERROR) {
      const learnt = chainAddresses(name, upstream.msg);
      if (learnt.addresses.length > 0) {
        try {
          await withTimeout(Promise.resolve(client.learned(name, learnt.addresses, learnt.ttl)), this.timeoutMs);
        } catch (err) {
          this.warn("learned", { err: String(err), name }, "dns resolver: learned() failed; answering SERVFAIL");
          return localReply(q.header, question, q.edns, DnsRcode.SERVFAIL);
        }
      }
    }
    const out = Buffer.from(upstream.raw);
    out.writeUInt16BE(q.header.id, 0);
    return out;
  }

  /** At most one warning per kind per 10 s: a hostile guest must not be able to flood the log. */
  private warn(kind: string, o: object, m: string): void {
    if (!this.log) return;
    const now = Date.now();
    if (now - (this.lastWarn.get(kind) ?? -Infinity) < 10_000) return;
    this.lastWarn.set(kind, now);
    try {
      this.log.warn(o, m);
    } catch {}
  }
}
