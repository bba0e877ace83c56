/**
 * DNS wire format (RFC 1035, EDNS0 from RFC 6891): just what the sandbox resolver needs.
 *
 * Everything parsed here is attacker input (the sandbox's queries) or comes off the network
 * (upstream answers): every read is bounds-checked, compression pointers may only point
 * strictly backwards (so following them always terminates), names are capped at 255 octets on
 * the wire and labels at 63, and any violation throws `DnsFormatError`, never anything else.
 */
import { isIPv4, isIPv6 } from "node:net";

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
/** Longest name on the wire, terminating zero included (RFC 1035 2.3.4). */
export const DNS_MAX_NAME_BYTES = 255;
export const DNS_MAX_LABEL_BYTES = 63;

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
  /** Presentation form, case preserved, no trailing dot ("" for the root); see `labelsToName`. */
  name: string;
  /** The raw labels, as they were on the wire. */
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
  rdata: Buffer;
  /** A/AAAA: the address; CNAME/NS/PTR: the target name (decompressed); otherwise null. */
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

const FLAG_QR = 0x8000;
const FLAG_AA = 0x0400;
const FLAG_TC = 0x0200;
const FLAG_RD = 0x0100;
const FLAG_RA = 0x0080;
const FLAG_AD = 0x0020;
const FLAG_CD = 0x0010;

export function parseHeader(buf: Buffer): DnsHeader {
  if (buf.length < DNS_HEADER_BYTES) throw new DnsFormatError("message shorter than a header");
  const flags = buf.readUInt16BE(2);
  return {
    id: buf.readUInt16BE(0),
    qr: (flags & FLAG_QR) !== 0,
    opcode: (flags >> 11) & 0xf,
    aa: (flags & FLAG_AA) !== 0,
    tc: (flags & FLAG_TC) !== 0,
    rd: (flags & FLAG_RD) !== 0,
    ra: (flags & FLAG_RA) !== 0,
    ad: (flags & FLAG_AD) !== 0,
    cd: (flags & FLAG_CD) !== 0,
    rcode: flags & 0xf,
    qdcount: buf.readUInt16BE(4),
    ancount: buf.readUInt16BE(6),
    nscount: buf.readUInt16BE(8),
    arcount: buf.readUInt16BE(10),
  };
}

function encodeFlags(h: Partial<DnsHeader>): number {
  let f = ((h.opcode ?? 0) & 0xf) << 11;
  if (h.qr) f |= FLAG_QR;
  if (h.aa) f |= FLAG_AA;
  if (h.tc) f |= FLAG_TC;
  if (h.rd) f |= FLAG_RD;
  if (h.ra) f |= FLAG_RA;
  if (h.ad) f |= FLAG_AD;
  if (h.cd) f |= FLAG_CD;
  return f | ((h.rcode ?? 0) & 0xf);
}

/** Label bytes written as themselves in presentation form; everything else becomes `\DDD`. */
function isPlainLabelByte(b: number): boolean {
  return (
    (b >= 0x30 && b <= 0x39) || // 0-9
    (b >= 0x41 && b <= 0x5a) || // A-Z
    (b >= 0x61 && b <= 0x7a) || // a-z
    b === 0x2d || // -
    b === 0x5f // _
  );
}

/** True when every label is non-empty and made only of letters, digits, '-' and '_'. */
export function isHostnameLabels(labels: readonly Buffer[]): boolean {
  for (const label of labels) {
    if (label.length === 0) return false;
    for (const b of label) if (!isPlainLabelByte(b)) return false;
  }
  return true;
}

/**
 * Presentation form: labels joined with '.', bytes other than letters, digits, '-' and '_'
 * escaped as `\DDD`, so a label containing a dot can never read as two labels. Case is kept;
 * lower-casing the result compares names the way DNS does (letters are never escaped).
 */
export function labelsToName(labels: readonly Buffer[]): string {
  const parts: string[] = [];
  for (const label of labels) {
    let s = "";
    for (const b of label) s += isPlainLabelByte(b) ? String.fromCharCode(b) : "\\" + String(b).padStart(3, "0");
    parts.push(s);
  }
  return parts.join(".");
}

/**
 * Reads a (possibly compressed) name at `offset`. `next` is the offset just after the name
 * where it started (after the first pointer, if any). Pointers must point strictly before the
 * start of the run of labels that contains them, so every jump goes backwards and the walk
 * terminates; the 255-octet cap bounds the labels collected.
 */
export function decodeName(buf: Buffer, offset: number): { labels: Buffer[]; name: string; next: number } {
  const labels: Buffer[] = [];
  let pos = offset;
  let runStart = offset;
  let next = -1;
  let wireBytes = 1; // the terminating zero
  for (;;) {
    if (pos < 0 || pos >= buf.length) throw new DnsFormatError("name runs past the end of the message");
    const len = buf[pos]!;
    if (len === 0) {
      if (next < 0) next = pos + 1;
      break;
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsFormatError("truncated compression pointer");
      const target = ((len & 0x3f) << 8) | buf[pos + 1]!;
      if (next < 0) next = pos + 2;
      if (target >= runStart) throw new DnsFormatError("compression pointer does not point backwards");
      runStart = target;
      pos = target;
      continue;
    }
    if (kind !== 0) throw new DnsFormatError("unsupported label type");
    if (len > DNS_MAX_LABEL_BYTES) throw new DnsFormatError("label longer than 63 octets");
    if (pos + 1 + len > buf.length) throw new DnsFormatError("label runs past the end of the message");
    wireBytes += 1 + len;
    if (wireBytes > DNS_MAX_NAME_BYTES) throw new DnsFormatError("name longer than 255 octets");
    labels.push(buf.subarray(pos + 1, pos + 1 + len));
    pos += 1 + len;
  }
  return { labels, name: labelsToName(labels), next };
}

function formatIPv6(b: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16));
  return groups.join(":");
}

function parseIPv6(text: string): Buffer {
  if (!isIPv6(text)) throw new TypeError(`not an IPv6 address: ${text}`);
  let s = text;
  const out = Buffer.alloc(16);
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  let tail: number[] = [];
  if (v4?.[1]) {
    const p = v4[1].split(".").map(Number);
    tail = [((p[0] ?? 0) << 8) | (p[1] ?? 0), ((p[2] ?? 0) << 8) | (p[3] ?? 0)];
    s = s.slice(0, -v4[1].length) + "0";
  }
  const [head = "", rest] = s.split("::") as [string, string | undefined];
  const hs = head ? head.split(":") : [];
  const rs = rest !== undefined && rest !== "" ? rest.split(":") : [];
  let groups = rest === undefined ? hs : [...hs, ...new Array<string>(8 - hs.length - rs.length).fill("0"), ...rs];
  groups = groups.map((g) => g || "0");
  const nums = groups.map((g) => Number.parseInt(g, 16));
  if (tail.length) nums.splice(nums.length - 1, 1, ...tail);
  nums.slice(0, 8).forEach((n, i) => {
    out.writeUInt16BE(n & 0xffff, i * 2);
  });
  return out;
}

function readRecord(buf: Buffer, offset: number): { record: DnsRecord; next: number } {
  const { name, next: afterName } = decodeName(buf, offset);
  if (afterName + 10 > buf.length) throw new DnsFormatError("record header runs past the end of the message");
  const type = buf.readUInt16BE(afterName);
  const klass = buf.readUInt16BE(afterName + 2);
  const rawTtl = buf.readUInt32BE(afterName + 4);
  const rdlength = buf.readUInt16BE(afterName + 8);
  const start = afterName + 10;
  const end = start + rdlength;
  if (end > buf.length) throw new DnsFormatError("rdata runs past the end of the message");
  const rdata = buf.subarray(start, end);
  let data: string | null = null;
  if (klass === DnsClass.IN && type === DnsType.A) {
    if (rdlength !== 4) throw new DnsFormatError("A record with rdata not 4 octets");
    data = `${rdata[0]}.${rdata[1]}.${rdata[2]}.${rdata[3]}`;
  } else if (klass === DnsClass.IN && type === DnsType.AAAA) {
    if (rdlength !== 16) throw new DnsFormatError("AAAA record with rdata not 16 octets");
    data = formatIPv6(rdata);
  } else if (type === DnsType.CNAME || type === DnsType.NS || type === DnsType.PTR) {
    const target = decodeName(buf, start);
    if (target.next !== end) throw new DnsFormatError("name in rdata does not fill the rdata");
    data = target.name;
  }
  return {
    // OPT keeps its raw TTL field (extended rcode, version, flags).
    record: { name, type, class: klass, ttl: rawTtl > 0x7fffffff && type !== DnsType.OPT ? 0 : rawTtl, rdata, data },
    next: end,
  };
}

/**
 * Parses a whole message. Record counts are bounded by the message itself (a record takes
 * at least 11 octets), so a header claiming 65535 answers only costs a bounds check.
 * Trailing bytes after the last section are ignored.
 */
export function parseMessage(buf: Buffer): DnsMessage {
  const header = parseHeader(buf);
  let pos = DNS_HEADER_BYTES;
  const questions: DnsQuestion[] = [];
  for (let i = 0; i < header.qdcount; i++) {
    const { labels, name, next } = decodeName(buf, pos);
    if (next + 4 > buf.length) throw new DnsFormatError("question runs past the end of the message");
    questions.push({ name, labels, type: buf.readUInt16BE(next), class: buf.readUInt16BE(next + 2) });
    pos = next + 4;
  }
  const section = (count: number): DnsRecord[] => {
    const out: DnsRecord[] = [];
    for (let i = 0; i < count; i++) {
      const { record, next } = readRecord(buf, pos);
      out.push(record);
      pos = next;
    }
    return out;
  };
  const answers = section(header.ancount);
  const authorities = section(header.nscount);
  const rawAdditionals = section(header.arcount);
  let edns: DnsEdns | null = null;
  const additionals: DnsRecord[] = [];
  for (const r of rawAdditionals) {
    if (r.type !== DnsType.OPT) {
      additionals.push(r);
      continue;
    }
    if (edns) throw new DnsFormatError("more than one OPT record");
    if (r.name !== "") throw new DnsFormatError("OPT record not owned by the root");
    // TTL field of OPT: extended rcode (8), version (8), DO (1), Z (15); the raw value is needed.
    const raw = r.ttl;
    edns = { udpSize: r.class, version: (raw >>> 16) & 0xff, dnssecOk: (raw & 0x8000) !== 0 };
  }
  return { header, questions, answers, authorities, additionals, edns };
}

/** Encodes a name in presentation form without escapes ("" or "." is the root). */
export function encodeName(name: string): Buffer {
  const labels = nameToLabels(name);
  const parts: Buffer[] = [];
  for (const l of labels) parts.push(Buffer.from([l.length]), l);
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

function nameToLabels(name: string): Buffer[] {
  const trimmed = name.endsWith(".") ? name.slice(0, -1) : name;
  if (trimmed === "") return [];
  if (trimmed.includes("\\")) throw new TypeError("escaped names are not supported by the encoder");
  const labels = trimmed.split(".").map((l) => Buffer.from(l, "latin1"));
  let total = 1;
  for (const l of labels) {
    if (l.length === 0 || l.length > DNS_MAX_LABEL_BYTES) throw new TypeError(`bad label in ${JSON.stringify(name)}`);
    total += 1 + l.length;
  }
  if (total > DNS_MAX_NAME_BYTES) throw new TypeError("name longer than 255 octets");
  return labels;
}

export interface DnsQuestionInput {
  /** A name, or the raw labels (kept byte for byte, case included). */
  name: string | readonly Buffer[];
  type: number;
  class?: number;
}

export interface DnsRecordInput {
  name: string;
  type: number;
  class?: number;
  ttl: number;
  /** A/AAAA: address text; CNAME/NS/PTR: a name (compressed); TXT: one string; else raw rdata. */
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

/** Growable writer with name compression (RFC 1035 4.1.4). */
class Writer {
  private buf = Buffer.alloc(512);
  length = 0;
  private readonly names = new Map<string, number>();

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void {
    this.ensure(1);
    this.buf.writeUInt8(v & 0xff, this.length);
    this.length += 1;
  }
  u16(v: number): void {
    this.ensure(2);
    this.buf.writeUInt16BE(v & 0xffff, this.length);
    this.length += 2;
  }
  u32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32BE(v >>> 0, this.length);
    this.length += 4;
  }
  bytes(b: Buffer): void {
    this.ensure(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  setU16(at: number, v: number): void {
    this.buf.writeUInt16BE(v & 0xffff, at);
  }
  name(labels: readonly Buffer[], compress: boolean): void {
    for (let i = 0; i < labels.length; i++) {
      const key = labelsToName(labels.slice(i)).toLowerCase();
      const at = compress ? this.names.get(key) : undefined;
      if (at !== undefined) {
        this.u16(0xc000 | at);
        return;
      }
      if (compress && this.length < 0x3fff) this.names.set(key, this.length);
      const l = labels[i]!;
      this.u8(l.length);
      this.bytes(l);
    }
    this.u8(0);
  }
  result(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.length));
  }
}

function writeRecord(w: Writer, r: DnsRecordInput): void {
  w.name(nameToLabels(r.name), true);
  w.u16(r.type);
  w.u16(r.class ?? DnsClass.IN);
  w.u32(r.ttl);
  const lenAt = w.length;
  w.u16(0);
  const start = w.length;
  if (Buffer.isBuffer(r.data)) {
    w.bytes(r.data);
  } else if (r.type === DnsType.A) {
    if (!isIPv4(r.data)) throw new TypeError(`not an IPv4 address: ${r.data}`);
    for (const p of r.data.split(".")) w.u8(Number(p));
  } else if (r.type === DnsType.AAAA) {
    w.bytes(parseIPv6(r.data));
  } else if (r.type === DnsType.CNAME || r.type === DnsType.NS || r.type === DnsType.PTR) {
    w.name(nameToLabels(r.data), true);
  } else if (r.type === DnsType.TXT) {
    const b = Buffer.from(r.data, "utf8");
    for (let i = 0; i < b.length || i === 0; i += 255) {
      const chunk = b.subarray(i, i + 255);
      w.u8(chunk.length);
      w.bytes(chunk);
    }
  } else {
    throw new TypeError(`give raw rdata for record type ${r.type}`);
  }
  const len = w.length - start;
  if (len > 0xffff) throw new TypeError("rdata longer than 65535 octets");
  w.setU16(lenAt, len);
}

export function encodeMessage(msg: DnsMessageInput): Buffer {
  const w = new Writer();
  const questions = msg.questions ?? [];
  const answers = msg.answers ?? [];
  const authorities = msg.authorities ?? [];
  const additionals = msg.additionals ?? [];
  w.u16(msg.header.id);
  w.u16(encodeFlags(msg.header));
  w.u16(questions.length);
  w.u16(answers.length);
  w.u16(authorities.length);
  w.u16(additionals.length + (msg.edns ? 1 : 0));
  for (const q of questions) {
    if (typeof q.name === "string") w.name(nameToLabels(q.name), true);
    else w.name(q.name, true);
    w.u16(q.type);
    w.u16(q.class ?? DnsClass.IN);
  }
  for (const r of answers) writeRecord(w, r);
  for (const r of authorities) writeRecord(w, r);
  for (const r of additionals) writeRecord(w, r);
  if (msg.edns) {
    w.u8(0);
    w.u16(DnsType.OPT);
    w.u16(msg.edns.udpSize);
    w.u32(msg.edns.dnssecOk ? 0x8000 : 0);
    w.u16(0);
  }
  return w.result();
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
