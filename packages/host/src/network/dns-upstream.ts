/**
 * The DNS resolver's side of upstream: which servers resolv.conf names, and one query/answer
 * exchange with one server over UDP or TCP (a fresh socket per query, connected to the server,
 * taking only an answer with our ID, QR set and the same question), and the retry over them.
 */

import { randomInt } from "node:crypto";
import dgram from "node:dgram";
import { readFileSync } from "node:fs";
import net from "node:net";
import { type DnsMessage, type DnsQuestion, encodeMessage, parseMessage } from "./dns-message.js";
import { MAX_UDP_PAYLOAD, type Query } from "./dns-replies.js";

export interface DnsUpstream {
  host: string;
  port: number;
}

/** An upstream answer: the bytes as received and their parse. */
export interface UpstreamAnswer {
  raw: Buffer;
  msg: DnsMessage;
}

/** What one exchange needs from the resolver: its timeout, and the set close() cancels through. */
export interface ExchangeContext {
  timeoutMs: number;
  /** The exchange adds its cancel function while in progress and removes it when done. */
  cancels: Set<() => void>;
}

export class UpstreamError extends Error {}

/**
 * The `nameserver` lines of resolv.conf that are IPv4 addresses, port 53. Loopback stubs
 * (127.0.0.53 and the like) are only returned when there is nothing else. A missing file
 * gives [].
 */
export function systemUpstreams(resolvConf = "/etc/resolv.conf"): DnsUpstream[] {
  let text: string;
  try {
    text = readFileSync(resolvConf, "utf8");
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const addr = m?.[1];
    if (addr && net.isIPv4(addr) && !found.includes(addr)) found.push(addr);
  }
  const real = found.filter((a) => !a.startsWith("127."));
  return (real.length > 0 ? real : found).map((host) => ({ host, port: 53 }));
}

/** "HOST" or "HOST:PORT" (port 53 by default). */
export function parseUpstreams(given: readonly string[]): DnsUpstream[] {
  return given.map((u) => {
    const [host, port] = u.split(":");
    return { host: host ?? u, port: Number(port ?? 53) };
  });
}

/** One query (`id`, asking `question`, encoded as `query`) to one upstream server and its answer. */
export type Exchange = (
  up: DnsUpstream,
  query: Buffer,
  id: number,
  question: DnsQuestion,
  ctx: ExchangeContext,
) => Promise<UpstreamAnswer>;

/** One query to `up` over UDP; rejects on timeout, socket error or cancellation. */
export const exchangeUdp: Exchange = (up, query, id, question, ctx) =>
  new Promise<UpstreamAnswer>((resolve, reject) => {
    const sock = dgram.createSocket({ type: net.isIPv6(up.host) ? "udp6" : "udp4" });
    const close = () => {
      try {
        sock.close();
      } catch {}
    };
    const { finish, done } = settleOnce(ctx, `timeout from ${up.host}:${up.port}`, close, resolve, reject);
    sock.on("error", (err) => finish(err));
    sock.on("message", (msg) => {
      const res = matchResponse(msg, id, question);
      if (res) finish(null, { raw: msg, msg: res });
    });
    // On a failed connect (e.g. ENETUNREACH) Node calls this callback with the error and emits
    // no 'error' event; sending then on the unconnected socket would throw out of a tick.
    const onConnect = (err?: Error | null) => {
      if (done()) return;
      if (err) return finish(err);
      try {
        sock.send(query, (e) => {
          if (e) finish(e);
        });
      } catch (e) {
        finish(e as Error);
      }
    };
    sock.connect(up.port, up.host, onConnect as () => void);
  });

/** One query to `up` over TCP (2-octet length prefix); rejects like exchangeUdp, or when the server closes first. */
export const exchangeTcp: Exchange = (up, query, id, question, ctx) =>
  new Promise<UpstreamAnswer>((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const sock = net.connect({ host: up.host, port: up.port });
    const { finish } = settleOnce(ctx, `TCP timeout from ${up.host}:${up.port}`, () => sock.destroy(), resolve, reject);
    sock.on("error", (err) => finish(err));
    sock.on("close", () => finish(new UpstreamError(`TCP connection to ${up.host}:${up.port} closed`)));
    sock.on("connect", () => {
      const frame = Buffer.allocUnsafe(2 + query.length);
      frame.writeUInt16BE(query.length, 0);
      query.copy(frame, 2);
      sock.write(frame);
    });
    sock.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2) {
        const len = buf.readUInt16BE(0);
        if (buf.length < 2 + len) return;
        const msg = Buffer.from(buf.subarray(2, 2 + len));
        buf = buf.subarray(2 + len);
        const res = matchResponse(msg, id, question);
        if (res) {
          finish(null, { raw: msg, msg: res });
          return;
        }
      }
    });
  });

/**
 * The one settling of an exchange: the first `finish` stops the deadline, leaves `ctx.cancels`,
 * closes the socket and settles; the deadline and a cancel (the resolver closing) finish it with
 * an UpstreamError. `done` says whether it has settled.
 */
function settleOnce(
  ctx: ExchangeContext,
  timeoutMessage: string,
  close: () => void,
  resolve: (answer: UpstreamAnswer) => void,
  reject: (err: Error) => void,
): { finish: (err: Error | null, res?: UpstreamAnswer) => void; done: () => boolean } {
  let done = false;
  const finish = (err: Error | null, res?: UpstreamAnswer) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    ctx.cancels.delete(cancel);
    close();
    if (err || !res) reject(err ?? new UpstreamError("no answer"));
    else resolve(res);
  };
  const cancel = () => finish(new UpstreamError("resolver closed"));
  const timer = setTimeout(() => finish(new UpstreamError(timeoutMessage)), ctx.timeoutMs);
  ctx.cancels.add(cancel);
  return { finish, done: () => done };
}

/** The parsed upstream message when it answers our query, null otherwise. */
function matchResponse(raw: Buffer, id: number, question: DnsQuestion): DnsMessage | null {
  let msg: DnsMessage;
  try {
    msg = parseMessage(raw);
  } catch {
    return null;
  }
  const h = msg.header;
  if (h.id !== id || !h.qr || h.opcode !== 0 || msg.questions.length !== 1) return null;
  const q = msg.questions[0]!;
  if (q.type !== question.type || q.class !== question.class) return null;
  if (q.name.toLowerCase() !== question.name.toLowerCase()) return null;
  return msg;
}

/** `p`, or a rejection after `ms` (the promise itself is not cancelled). */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Asks upstream: the first server, then one retry on the next. The query is rebuilt from the
 * parsed question (fresh random ID, RD, the client's CD bit, OPT only when the client sent one);
 * a truncated UDP answer is asked again over TCP.
 */
export async function askUpstream(
  upstream: readonly DnsUpstream[],
  q: Query,
  transport: "udp" | "tcp",
  ctx: ExchangeContext,
  closed: () => boolean,
): Promise<UpstreamAnswer> {
  if (upstream.length === 0) throw new UpstreamError("no upstream servers configured");
  const id = randomInt(0, 0x10000);
  const query = encodeMessage({
    header: { id, rd: true, cd: q.header.cd },
    questions: [{ name: q.question.labels, type: q.question.type }],
    edns: q.edns ? { udpSize: MAX_UDP_PAYLOAD, dnssecOk: q.edns.dnssecOk } : null,
  });
  let lastErr: unknown = null;
  for (let attempt = 0; attempt < 2; attempt++) {
    const up = upstream[attempt % upstream.length]!;
    try {
      if (transport === "udp") {
        const res = await exchangeUdp(up, query, id, q.question, ctx);
        if (!res.msg.header.tc) return res;
      }
      return await exchangeTcp(up, query, id, q.question, ctx);
    } catch (err) {
      lastErr = err;
      if (closed()) break;
    }
  }
  throw lastErr instanceof Error ? lastErr : new UpstreamError("upstream failed");
}
