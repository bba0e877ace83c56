/// <reference path="./dns-packet-tables.d.ts" />
/**
 * DNS messages for the sandbox resolver, over `dns-packet` (RFC 1035 wire format, EDNS0).
 *
 * The library reads and writes the wire; this module gives the resolver numbers instead of
 * names for types, classes and codes, presentation-form names that cannot be misread, and one
 * error type. Everything parsed here is attacker input (the sandbox's queries) or comes off the
 * network (upstream answers): dns-packet bounds every read and lets compression pointers point
 * only backwards (so following them terminates) and caps names at 255 octets; any failure of
 * the library is rethrown as `DnsFormatError`, never anything else.
 */
import packet from "dns-packet";
import classes from "dns-packet/classes.js";
import types from "dns-packet/types.js";

export const DnsType = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  OPT: 41,
  IXFR: 251,
  AXFR: 252,
  ANY: 255,
} as const;

export const DnsClass = { IN: 1 } as const;

export const DnsRcode = {
  NOERROR: 0,
  FORMERR: 1,
  SERVFAIL: 2,
  NXDOMAIN: 3,
  NOTIMP: 4,
  REFUSED: 5,
} as const;

export const DNS_HEADER_BYTES = 12;

export class DnsFormatError extends Error {
  override name = "DnsFormatError";
}

export interface DnsHeader {
  id: number;
  qr: boolean;
  opcode: number;
  aa: boolean;
  tc: boolean;
  rd: boolean;
  ra: boolean;
  ad: boolean;
  cd: boolean;
  rcode: number;
  qdcount: number;
  ancount: number;
  nscount: number;
  arcount: number;
}

export interface DnsQuestion {
  /** Presentation form, case preserved, no trailing dot ("" for the root); see `decodeName`. */
  name: string;
  /** The labels (a byte other than a letter, digit, '-' or '_' makes `isHostnameLabels` false). */
  labels: Buffer[];
  type: number;
  class: number;
}

export interface DnsRecord {
  name: string;
  type: number;
  class: number;
  /** Seconds; values with the top bit set read as 0 (RFC 2181 8). */
  ttl: number;
  /** A/AAAA: the address; CNAME/NS/PTR: the target name; otherwise null. */
  data: string | null;
}

export interface DnsEdns {
  udpSize: number;
  version: number;
  dnssecOk: boolean;
}

export interface DnsMessage {
  header: DnsHeader;
  questions: DnsQuestion[];
  answers: DnsRecord[];
  authorities: DnsRecord[];
  /** Additional records other than the OPT pseudo-record (which is in `edns`). */
  additionals: DnsRecord[];
  edns: DnsEdns | null;
}

export interface DnsQuestionInput {
  /** A name, or its labels. */
  name: string | readonly Buffer[];
  type: number;
  class?: number;
}

export interface DnsRecordInput {
  name: string;
  type: number;
  class?: number;
  ttl: number;
  /** A/AAAA: address text; CNAME/NS/PTR: a name; TXT: one string; else raw rdata. */
  data: string | Buffer;
}

export interface DnsMessageInput {
  header: Partial<DnsHeader> & { id: number };
  questions?: DnsQuestionInput[];
  answers?: DnsRecordInput[];
  authorities?: DnsRecordInput[];
  additionals?: DnsRecordInput[];
  /** Adds an OPT pseudo-record. */
  edns?: { udpSize: number; dnssecOk?: boolean } | null;
}

// dns-packet's name codec: exported at run time, left out of its type declarations.
interface NameCodec {
  decode: ((buf: Buffer, offset?: number, opts?: { mail?: boolean }) => string) & { bytes: number };
}
const codecs = packet as unknown as { name: NameCodec };

/** Runs a dns-packet decoder: whatever it throws becomes a DnsFormatError. */
function decoding<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof DnsFormatError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    // dns-packet says "name too long" for names past 255 octets on the wire.
    throw new DnsFormatError(/name too long/.test(why) ? "name longer than 255 octets" : `malformed message: ${why}`);
  }
}

/** Label bytes written as themselves in presentation form; everything else becomes `\DDD`. */
function isPlainLabelByte(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x2d || b === 0x5f;
}

/** True when every label is non-empty and made only of letters, digits, '-' and '_'. */
export function isHostnameLabels(labels: readonly Buffer[]): boolean {
  return labels.every((label) => label.length > 0 && label.every(isPlainLabelByte));
}

/**
 * Reads a (possibly compressed) name at `offset`; `next` is the offset just after it.
 * Presentation form: bytes other than letters, digits, '-' and '_' are escaped as `\DDD`, so a
 * label containing a dot can never read as two labels. Case is kept.
 */
export function decodeName(buf: Buffer, offset: number): { labels: Buffer[]; name: string; next: number } {
  // `mail` makes dns-packet escape a dot inside a label as "\.", telling it apart from a separator.
  const text = decoding(() => codecs.name.decode(buf, offset, { mail: true }));
  const next = offset + codecs.name.decode.bytes;
  const labels = text === "." ? [] : text.split(/(?<!\\)\./).map((l) => Buffer.from(l.replaceAll("\\.", "."), "utf8"));
  const name = labels
    .map((l) => [...l].map((b) => (isPlainLabelByte(b) ? String.fromCharCode(b) : "\\" + String(b).padStart(3, "0"))).join(""))
    .join(".");
  return { labels, name, next };
}

/** The fixed 12-octet header (RFC 1035 4.1.1): what a reply to an unparseable query still needs. */
export function parseHeader(buf: Buffer): DnsHeader {
  if (buf.length < DNS_HEADER_BYTES) throw new DnsFormatError("message shorter than a header");
  const f = buf.readUInt16BE(2);
  return {
    id: buf.readUInt16BE(0),
    qr: (f & 0x8000) !== 0,
    opcode: (f >> 11) & 0xf,
    aa: (f & packet.AUTHORITATIVE_ANSWER) !== 0,
    tc: (f & packet.TRUNCATED_RESPONSE) !== 0,
    rd: (f & packet.RECURSION_DESIRED) !== 0,
    ra: (f & packet.RECURSION_AVAILABLE) !== 0,
    ad: (f & packet.AUTHENTIC_DATA) !== 0,
    cd: (f & packet.CHECKING_DISABLED) !== 0,
    rcode: f & 0xf,
    qdcount: buf.readUInt16BE(4),
    ancount: buf.readUInt16BE(6),
    nscount: buf.readUInt16BE(8),
    arcount: buf.readUInt16BE(10),
  };
}

const NAMED_DATA = new Set<number>([DnsType.A, DnsType.AAAA, DnsType.CNAME, DnsType.NS, DnsType.PTR]);

function recordOf(a: packet.Answer): DnsRecord {
  const type = types.toType(a.type);
  const ttl = "ttl" in a ? (a.ttl ?? 0) : 0;
  const klass = "class" in a && a.class ? classes.toClass(a.class) : DnsClass.IN;
  const value = "data" in a ? a.data : null;
  const data = NAMED_DATA.has(type) && typeof value === "string" ? value.replace(/\.$/, "") : null;
  return { name: a.name === "." ? "" : a.name, type, class: klass, ttl: ttl > 0x7fffffff ? 0 : ttl, data };
}

/**
 * Parses a whole message. Record counts are bounded by the message itself, so a header claiming
 * 65535 answers only costs a bounds check. Trailing bytes after the last section are ignored.
 */
export function parseMessage(buf: Buffer): DnsMessage {
  const header = parseHeader(buf);
  // A question takes at least 5 octets and a record 11: a header claiming more than the message
  // can hold is refused before dns-packet allocates its sections by the claimed counts.
  const least = header.qdcount * 5 + (header.ancount + header.nscount + header.arcount) * 11;
  if (DNS_HEADER_BYTES + least > buf.length) throw new DnsFormatError("record counts larger than the message");
  const p = decoding(() => packet.decode(buf));
  // The first question's name again with dots inside labels escaped (the resolver refuses those).
  const first = header.qdcount > 0 ? decodeName(buf, DNS_HEADER_BYTES) : null;
  const questions = (p.questions ?? []).map((q, i) => {
    const named =
      i === 0 && first ? first : { name: q.name === "." ? "" : q.name, labels: q.name.split(".").map((l) => Buffer.from(l)) };
    const { name, labels } = named;
    return { name, labels, type: types.toType(q.type), class: classes.toClass(q.class ?? "IN") };
  });
  let edns: DnsEdns | null = null;
  const additionals: DnsRecord[] = [];
  for (const r of p.additionals ?? []) {
    if (r.type !== "OPT") {
      additionals.push(recordOf(r));
      continue;
    }
    if (edns) throw new DnsFormatError("more than one OPT record");
    if (r.name !== ".") throw new DnsFormatError("OPT record not owned by the root");
    const raw = r as packet.OptAnswer & { ednsVersion?: number };
    edns = {
      udpSize: raw.udpPayloadSize ?? 512,
      version: raw.ednsVersion ?? 0,
      dnssecOk: ((raw.flags ?? 0) & packet.DNSSEC_OK) !== 0,
    };
  }
  return {
    header,
    questions,
    answers: (p.answers ?? []).map(recordOf),
    authorities: (p.authorities ?? []).map(recordOf),
    additionals,
    edns,
  };
}

function typeName(type: number, raw: boolean): string {
  // dns-packet writes the rdata of a type it does not know byte for byte.
  return raw ? `UNKNOWN_${type}` : types.toString(type);
}

function nameText(name: string | readonly Buffer[]): string {
  const text = typeof name === "string" ? name : name.map((l) => l.toString("utf8")).join(".");
  return text === "" ? "." : text;
}

function answerOf(r: DnsRecordInput): packet.Answer {
  const raw = Buffer.isBuffer(r.data);
  // A TXT string goes out as character-strings of at most 255 octets each.
  let data: string | Buffer | Buffer[] = r.data;
  if (r.type === DnsType.TXT && typeof r.data === "string") {
    const bytes = Buffer.from(r.data, "utf8");
    data = [];
    for (let i = 0; i < bytes.length || i === 0; i += 255) data.push(bytes.subarray(i, i + 255));
  }
  return {
    name: nameText(r.name),
    type: typeName(r.type, raw),
    class: classes.toString(r.class ?? DnsClass.IN),
    ttl: r.ttl,
    data,
  } as packet.Answer;
}

export function encodeMessage(msg: DnsMessageInput): Buffer {
  const h = msg.header;
  const flags =
    (((h.opcode ?? 0) & 0xf) << 11) |
    (h.aa ? packet.AUTHORITATIVE_ANSWER : 0) |
    (h.tc ? packet.TRUNCATED_RESPONSE : 0) |
    (h.rd ? packet.RECURSION_DESIRED : 0) |
    (h.ra ? packet.RECURSION_AVAILABLE : 0) |
    (h.ad ? packet.AUTHENTIC_DATA : 0) |
    (h.cd ? packet.CHECKING_DISABLED : 0) |
    ((h.rcode ?? 0) & 0xf);
  const additionals = (msg.additionals ?? []).map(answerOf);
  if (msg.edns) {
    const flags = msg.edns.dnssecOk ? packet.DNSSEC_OK : 0;
    additionals.push({
      name: ".",
      type: "OPT",
      udpPayloadSize: msg.edns.udpSize,
      extendedRcode: 0,
      ednsVersion: 0,
      flags,
      flag_do: flags !== 0,
      options: [],
    });
  }
  return packet.encode({
    id: h.id,
    type: h.qr ? "response" : "query",
    flags,
    questions: (msg.questions ?? []).map((q) => ({
      name: nameText(q.name),
      type: typeName(q.type, false) as packet.RecordType,
      class: classes.toString(q.class ?? DnsClass.IN) as packet.RecordClass,
    })),
    answers: (msg.answers ?? []).map(answerOf),
    authorities: (msg.authorities ?? []).map(answerOf),
    additionals,
  });
}

/** Builds a recursive query (RD set). */
export function encodeQuery(
  id: number,
  name: string | readonly Buffer[],
  type: number,
  opts: { edns?: { udpSize: number; dnssecOk?: boolean } | null; cd?: boolean } = {},
): Buffer {
  return encodeMessage({
    header: { id, rd: true, cd: opts.cd ?? false },
    questions: [{ name, type }],
    edns: opts.edns ?? null,
  });
}
