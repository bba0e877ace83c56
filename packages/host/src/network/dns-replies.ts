/**
 * The DNS resolver's pure helpers: hostname rule matching, the replies it writes itself
 * (errors, denials, local names), UDP size limits and truncation, and the addresses a CNAME
 * chain resolves to. No sockets here; the decisions are documented in dns-resolver.ts.
 */

import net from "node:net";
import { classifyNetworkRule } from "@sandtree/protocol";
import {
  DnsClass,
  type DnsEdns,
  type DnsHeader,
  type DnsMessage,
  type DnsQuestion,
  type DnsRecordInput,
  DnsType,
  encodeMessage,
  parseHeader,
} from "./dns-message.js";

export const MAX_UDP_PAYLOAD = 1232;
export const MIN_UDP_PAYLOAD = 512;

/** A parsed query that passed the checks that make it answerable. */
export interface Query {
  header: DnsHeader;
  question: DnsQuestion;
  edns: DnsEdns | null;
}

/**
 * True when `name` matches one of the hostname rules: a "host" rule is the exact name, a
 * "wildcard" rule `*.example.com` any name strictly below example.com. IP and CIDR rules never
 * match a name. Case-insensitive; a trailing dot on the name or rule is ignored.
 */
export function nameMatches(name: string, rules: readonly string[]): boolean {
  const n = normaliseName(name);
  if (n === "") return false;
  for (const raw of rules) {
    const rule = normaliseName(raw);
    const kind = classifyNetworkRule(rule);
    if (kind === "host") {
      if (n === rule) return true;
    } else if (kind === "wildcard") {
      const suffix = rule.slice(1); // ".example.com"
      if (n.length > suffix.length && n.endsWith(suffix)) return true;
    }
  }
  return false;
}

function normaliseName(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

/** "::ffff:10.0.0.2" (dual-stack sockets) -> "10.0.0.2". */
export function plainAddress(addr: string): string {
  return addr.startsWith("::ffff:") && net.isIPv4(addr.slice(7)) ? addr.slice(7) : addr;
}

export function udpLimit(edns: DnsEdns | null): number {
  if (!edns) return MIN_UDP_PAYLOAD;
  return Math.min(MAX_UDP_PAYLOAD, Math.max(MIN_UDP_PAYLOAD, edns.udpSize));
}

/** A reply the resolver writes itself (errors, denials, local names): the client's ID and question, no records unless given. */
export function localReply(
  header: DnsHeader,
  question: DnsQuestion | null,
  edns: DnsEdns | null,
  rcode: number,
  extra: { aa?: boolean; answers?: DnsRecordInput[]; tc?: boolean } = {},
): Buffer {
  return encodeMessage({
    header: {
      id: header.id,
      qr: true,
      opcode: header.opcode,
      aa: extra.aa ?? false,
      tc: extra.tc ?? false,
      rd: header.rd,
      ra: true,
      cd: header.cd,
      rcode,
    },
    questions: question ? [{ name: question.labels, type: question.type, class: question.class }] : [],
    answers: extra.answers ?? [],
    edns: edns ? { udpSize: MAX_UDP_PAYLOAD } : null,
  });
}

/** The reply, or when longer than `limit`, its header and the question with TC set. */
export function fitReply(reply: Buffer, q: Query, limit: number): Buffer {
  if (reply.length <= limit) return reply;
  const h = parseHeader(reply);
  return encodeMessage({
    header: { ...h, id: q.header.id, tc: true },
    questions: [{ name: q.question.labels, type: q.question.type, class: q.question.class }],
    edns: q.edns ? { udpSize: MAX_UDP_PAYLOAD } : null,
  });
}

/** A addresses for `name` and its CNAME chain in the answer section, with the smallest TTL. */
export function chainAddresses(name: string, msg: DnsMessage): { addresses: string[]; ttl: number } {
  const chain = new Set([name.toLowerCase()]);
  let ttl = Number.POSITIVE_INFINITY;
  // Each pass adds at least one name or stops, so answers.length + 1 passes reach the fixpoint.
  const used = new Set<number>();
  for (let pass = 0; pass <= msg.answers.length; pass++) {
    let grew = false;
    msg.answers.forEach((r, i) => {
      if (used.has(i) || r.type !== DnsType.CNAME || r.class !== DnsClass.IN || r.data === null) return;
      if (!chain.has(r.name.toLowerCase())) return;
      used.add(i);
      ttl = Math.min(ttl, r.ttl);
      const target = r.data.toLowerCase();
      if (!chain.has(target)) {
        chain.add(target);
        grew = true;
      }
    });
    if (!grew) break;
  }
  const addresses: string[] = [];
  let aTtl = Number.POSITIVE_INFINITY;
  for (const r of msg.answers) {
    if (r.type !== DnsType.A || r.class !== DnsClass.IN || r.data === null) continue;
    if (!chain.has(r.name.toLowerCase())) continue;
    aTtl = Math.min(aTtl, r.ttl);
    if (!addresses.includes(r.data)) addresses.push(r.data);
  }
  if (addresses.length === 0) return { addresses, ttl: 0 };
  return { addresses, ttl: Math.min(ttl, aTtl) };
}
