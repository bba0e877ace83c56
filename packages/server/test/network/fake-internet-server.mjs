// The servers of the fake internet, run inside its network namespace by fake-internet.ts:
//   node fake-internet-server.mjs '<config json>'
// config: { dnsAddress, serverAddresses: string[], httpPorts: number[], echoPort, dns: { name: string[] }, ttl }
// It serves an authoritative DNS server (UDP + TCP) on dnsAddress:53, HTTP on each server address and
// HTTP port, and a UDP + TCP echo on each server address's echo port. It logs every DNS query and every
// HTTP / UDP / TCP hit. Control: one JSON request per stdin line, one JSON reply per stdout line
// ({"id":..,"ok":true,..} or {"id":..,"ok":false,"error":".."}); the first stdout line is {"ready":true}
// (or {"ready":false,"error":".."}). It exits when stdin ends, so it never outlives its parent.
import dgram from "node:dgram";
import http from "node:http";
import net from "node:net";
import readline from "node:readline";

const config = JSON.parse(process.argv[2] ?? "{}");
const dnsAddress = config.dnsAddress ?? "198.51.100.53";
const serverAddresses = config.serverAddresses ?? [];
const httpPorts = config.httpPorts ?? [80];
const echoPort = config.echoPort ?? 7;
const ttl = config.ttl ?? 5;

/** lower-case name without trailing dot -> IPv4 addresses ([] = the name exists but has no A record). */
const table = new Map();
for (const [name, addrs] of Object.entries(config.dns ?? {})) table.set(normName(name), [...addrs]);

/** Every query and hit, in arrival order. */
let log = [];
function record(entry) {
  log.push({ time: Date.now(), ...entry });
}

function normName(name) {
  return String(name).toLowerCase().replace(/\.$/, "");
}

function isIPv4(a) {
  return net.isIPv4(a);
}

// ---------------------------------------------------------------- DNS

const TYPE_NAMES = { 1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA", 33: "SRV", 255: "ANY" };
const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 };

/** Reads a (possibly compressed) name at off; returns { name, end } where end is just past it in msg. */
function readName(msg, off) {
  const labels = [];
  let end = -1;
  let hops = 0;
  for (;;) {
    if (off >= msg.length) throw new Error("name runs past the message");
    const len = msg[off];
    if (len === 0) {
      if (end < 0) end = off + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= msg.length || ++hops > 32) throw new Error("bad compression pointer");
      if (end < 0) end = off + 2;
      off = ((len & 0x3f) << 8) | msg[off + 1];
      continue;
    }
    if (len > 63 || off + 1 + len > msg.length) throw new Error("bad label");
    labels.push(msg.subarray(off + 1, off + 1 + len).toString("latin1"));
    off += 1 + len;
  }
  return { name: labels.join("."), end };
}

/**
 * Answers one DNS message. Returns { response, entry } (entry: what to log) or null when the message is
 * too short to even carry an id (dropped).
 */
function answerDns(msg, maxSize) {
  if (msg.length < 12) return null;
  const id = msg.readUInt16BE(0);
  const flags = msg.readUInt16BE(2);
  const opcode = (flags >> 11) & 0xf;
  const rd = flags & 0x0100;
  const qdcount = msg.readUInt16BE(4);
  let rcode = RCODE.NOERROR;
  let question = null;
  let name = "";
  let qtype = 0;
  let answers = [];
  if (flags & 0x8000) return null; // a response, not a query
  if (opcode !== 0) rcode = RCODE.NOTIMP;
  else if (qdcount !== 1) rcode = RCODE.FORMERR;
  else {
    try {
      const q = readName(msg, 12);
      if (q.end + 4 > msg.length) throw new Error("short question");
      name = q.name;
      qtype = msg.readUInt16BE(q.end);
      const qclass = msg.readUInt16BE(q.end + 2);
      // Re-encode the question uncompressed so the answers' pointer 0xc00c is always right.
      question = Buffer.concat([encodeName(name), msg.subarray(q.end, q.end + 4)]);
      const addrs = table.get(normName(name));
      if (addrs === undefined) rcode = RCODE.NXDOMAIN;
      else if ((qclass === 1 || qclass === 255) && (qtype === 1 || qtype === 255)) answers = addrs;
      // Any other type of an existing name (AAAA included): NOERROR with no answer.
    } catch {
      rcode = RCODE.FORMERR;
      question = null;
    }
  }
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  // QR, opcode copied, AA, RD copied, RA clear.
  let outFlags = 0x8000 | (opcode << 11) | 0x0400 | rd | rcode;
  let records = answers.map((a) => {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0);
    rr.writeUInt16BE(1, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(ttl, 6);
    rr.writeUInt16BE(4, 10);
    a.split(".").forEach((octet, i) => {
      rr[12 + i] = Number(octet);
    });
    return rr;
  });
  if (12 + (question?.length ?? 0) + records.length * 16 > maxSize) {
    outFlags |= 0x0200; // TC: retry over TCP
    records = [];
  }
  header.writeUInt16BE(outFlags, 2);
  header.writeUInt16BE(question ? 1 : 0, 4);
  header.writeUInt16BE(records.length, 6);
  const response = Buffer.concat([header, ...(question ? [question] : []), ...records]);
  const rcodeName = Object.keys(RCODE).find((k) => RCODE[k] === rcode) ?? String(rcode);
  const entry = {
    kind: "dns",
    name: normName(name),
    type: TYPE_NAMES[qtype] ?? String(qtype),
    rcode: rcodeName,
    answers: records.length > 0 ? [...answers] : [],
  };
  return { response, entry };
}

function encodeName(name) {
  const parts = name === "" ? [] : name.split(".");
  return Buffer.concat([
    ...parts.map((p) => {
      const b = Buffer.from(p, "latin1");
      return Buffer.concat([Buffer.from([b.length]), b]);
    }),
    Buffer.from([0]),
  ]);
}

function listenUdp(address, port, onMessage) {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket("udp4");
    sock.once("error", reject);
    sock.on("message", (msg, rinfo) => onMessage(sock, msg, rinfo));
    sock.bind(port, address, () => {
      sock.off("error", reject);
      sock.on("error", (err) => record({ kind: "error", where: `udp ${address}:${port}`, error: String(err) }));
      resolve(sock);
    });
  });
}

function listenTcp(server, address, port) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, address, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}

function startDns() {
  const udp = listenUdp(dnsAddress, 53, (sock, msg, rinfo) => {
    const r = answerDns(msg, 512);
    if (!r) return;
    record({ ...r.entry, proto: "udp", source: `${rinfo.address}:${rinfo.port}` });
    sock.send(r.response, rinfo.port, rinfo.address);
  });
  const tcpServer = net.createServer((conn) => {
    let buf = Buffer.alloc(0);
    conn.on("error", () => {});
    conn.on("data", (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2) {
        const len = buf.readUInt16BE(0);
        if (buf.length < 2 + len) break;
        const msg = buf.subarray(2, 2 + len);
        buf = buf.subarray(2 + len);
        const r = answerDns(msg, 65535);
        if (!r) continue;
        record({ ...r.entry, proto: "tcp", source: `${conn.remoteAddress}:${conn.remotePort}` });
        const lenBuf = Buffer.alloc(2);
        lenBuf.writeUInt16BE(r.response.length, 0);
        conn.write(Buffer.concat([lenBuf, r.response]));
      }
    });
  });
  return Promise.all([udp, listenTcp(tcpServer, dnsAddress, 53)]);
}

// ---------------------------------------------------------------- HTTP and echo

function startHttp(address, port) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    record({
      kind: "http",
      local: `${address}:${port}`,
      source: `${req.socket.remoteAddress}:${req.socket.remotePort}`,
      method: req.method,
      path: req.url,
      host: req.headers.host ?? null,
    });
    req.resume();
    const send = (status, body) => {
      res.writeHead(status, { "content-type": "text/plain", "x-served-by": address, connection: "close" });
      res.end(body);
    };
    if (req.method !== "GET" && req.method !== "HEAD") send(405, "method not allowed");
    else if (url.pathname === "/") send(200, `hello from ${address}`);
    else if (url.pathname === "/echo") send(200, url.searchParams.get("x") ?? "");
    else send(404, "not found");
  });
  return listenTcp(server, address, port);
}

function startEcho(address) {
  const udp = listenUdp(address, echoPort, (sock, msg, rinfo) => {
    record({ kind: "udp", local: `${address}:${echoPort}`, source: `${rinfo.address}:${rinfo.port}`, payload: msg.toString() });
    sock.send(Buffer.concat([Buffer.from("echo:"), msg]), rinfo.port, rinfo.address);
  });
  const tcpServer = net.createServer((conn) => {
    record({ kind: "tcp", local: `${address}:${echoPort}`, source: `${conn.remoteAddress}:${conn.remotePort}` });
    conn.on("error", () => {});
    conn.pipe(conn);
  });
  return Promise.all([udp, listenTcp(tcpServer, address, echoPort)]);
}

// ---------------------------------------------------------------- control

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function handle(req) {
  switch (req.op) {
    case "ping":
      return {};
    case "setDns": {
      if (typeof req.name !== "string" || req.name === "") throw new Error("setDns needs a name");
      if (!Array.isArray(req.addresses) || !req.addresses.every(isIPv4)) throw new Error("setDns needs IPv4 addresses");
      table.set(normName(req.name), [...req.addresses]);
      return {};
    }
    case "removeDns":
      return { removed: table.delete(normName(req.name)) };
    case "dns":
      return { table: Object.fromEntries(table) };
    case "log":
      return { log };
    case "clearLog":
      log = [];
      return {};
    default:
      throw new Error(`unknown op ${JSON.stringify(req.op)}`);
  }
}

try {
  await Promise.all([startDns(), ...serverAddresses.flatMap((a) => [...httpPorts.map((p) => startHttp(a, p)), startEcho(a)])]);
} catch (err) {
  reply({ ready: false, error: String(err) });
  process.exit(1);
}
reply({ ready: true });

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line.trim() === "") return;
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    reply({ ok: false, error: "bad json" });
    return;
  }
  try {
    reply({ id: req.id, ok: true, ...handle(req) });
  } catch (err) {
    reply({ id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) });
  }
});
rl.on("close", () => process.exit(0));
