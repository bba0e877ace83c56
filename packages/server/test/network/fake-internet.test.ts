// Self-test of the fake internet harness: everything is checked from inside the host namespace,
// the way a sandbox's traffic (masqueraded to 198.51.100.1) will reach it.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFakeInternet, type FakeInternet, fakeInternetUnavailableReason } from "./fake-internet.js";

/** python3 <script> NAME SERVER udp|tcp QTYPE -> {"rcode":n,"aa":bool,"answers":[...]} */
const DNS_QUERY_PY = `
import json, socket, struct, sys
name, server, proto, qtype = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\\0" + struct.pack(">HH", qtype, 1)
if proto == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.sendto(q, (server, 53)); r = s.recv(4096)
else:
    s = socket.create_connection((server, 53), 3); s.sendall(struct.pack(">H", len(q)) + q)
    b = b""
    while len(b) < 2: b += s.recv(2 - len(b))
    n = struct.unpack(">H", b)[0]; r = b""
    while len(r) < n: r += s.recv(n - len(r))
assert r[:2] == b"\\x12\\x34"
an = struct.unpack(">H", r[6:8])[0]
i = 12
while r[i]: i += r[i] + 1
i += 5
answers = []
for _ in range(an):
    i += 2 if r[i] & 0xC0 == 0xC0 else 0
    t, c, ttl, rdlen = struct.unpack(">HHIH", r[i:i + 10]); i += 10
    if t == 1: answers.append(socket.inet_ntoa(r[i:i + 4]))
    i += rdlen
print(json.dumps({"rcode": r[3] & 15, "aa": bool(r[2] & 4), "answers": answers}))
`;

/** python3 <script> udp|tcp ADDR PORT PAYLOAD -> the reply */
const ECHO_PY = `
import socket, sys
proto, addr, port, payload = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
if proto == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.sendto(payload, (addr, port))
    sys.stdout.write(s.recv(4096).decode())
else:
    s = socket.create_connection((addr, port), 3); s.sendall(payload); s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        d = s.recv(4096)
        if not d: break
        out += d
    sys.stdout.write(out.decode())
`;

const reason = fakeInternetUnavailableReason();
if (reason !== null) console.warn(`[fake-internet.test] skipped: ${reason}`);

/** The real interpreter: a pyenv shim costs ~1 s a start. */
function findPython(): string {
  try {
    return execFileSync("python3", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).trim() || "python3";
  } catch {
    return "python3";
  }
}

describe.skipIf(reason !== null)(`fake internet${reason !== null ? ` (skipped: ${reason})` : ""}`, () => {
  let net: FakeInternet;
  let python = "python3";

  beforeAll(async () => {
    python = findPython();
    net = await createFakeInternet();
  }, 30_000);
  afterAll(async () => {
    await net?.close();
  });

  async function host(cmd: string, ...args: string[]): Promise<string> {
    const r = await net.execInHost(cmd, args);
    if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")} -> ${r.code ?? r.signal}: ${r.stderr}`);
    return r.stdout;
  }
  async function dig(name: string, proto: "udp" | "tcp" = "udp", qtype = 1) {
    const out = await host(python, "-c", DNS_QUERY_PY, name, net.dnsAddress, proto, String(qtype));
    return JSON.parse(out) as { rcode: number; aa: boolean; answers: string[] };
  }

  it("serves HTTP on every server address, and /echo", async () => {
    for (const a of net.serverAddresses) {
      expect(await host("busybox", "wget", "-qO-", `http://${a}/`)).toBe(`hello from ${a}`);
    }
    expect(await host("busybox", "wget", "-qO-", "http://203.0.113.20/echo?x=hi%20there")).toBe("hi there");
    const log = await net.log();
    const hits = log.filter((e) => e.kind === "http");
    expect(hits.map((e) => e.kind === "http" && e.local)).toEqual([
      ...net.serverAddresses.map((a) => `${a}:80`),
      "203.0.113.20:80",
    ]);
    expect(hits.every((e) => e.source.startsWith("198.51.100.1:"))).toBe(true);
  });

  it("answers ICMP echo (the kernel)", async () => {
    await host("busybox", "ping", "-c", "1", "-W", "2", "203.0.113.30");
  });

  it("answers DNS over UDP and TCP from the initial table", async () => {
    expect(await dig("allowed.test")).toEqual({ rcode: 0, aa: true, answers: ["203.0.113.10"] });
    expect(await dig("OTHER.test", "tcp")).toEqual({ rcode: 0, aa: true, answers: ["203.0.113.20"] });
    expect((await dig("api.wild.test")).answers).toEqual(["203.0.113.30"]);
    expect((await dig("deep.api.wild.test")).answers).toEqual(["203.0.113.30"]);
    expect((await dig("denied.test", "tcp")).answers).toEqual(["203.0.113.40"]);
    expect(await dig("allowed.test", "udp", 28)).toEqual({ rcode: 0, aa: true, answers: [] }); // AAAA: empty
    expect(await dig("wild.test")).toEqual({ rcode: 3, aa: true, answers: [] }); // NXDOMAIN
    expect(await dig("nope.test", "tcp")).toEqual({ rcode: 3, aa: true, answers: [] });
  });

  it("changes answers after setDns / removeDns", async () => {
    await net.setDns("allowed.test", ["203.0.113.20", "203.0.113.30"]);
    expect((await dig("allowed.test")).answers).toEqual(["203.0.113.20", "203.0.113.30"]);
    await net.setDns("new.test", ["203.0.113.40"]);
    expect((await dig("new.test", "tcp")).answers).toEqual(["203.0.113.40"]);
    expect(await net.removeDns("new.test")).toBe(true);
    expect((await dig("new.test")).rcode).toBe(3);
    await net.setDns("allowed.test", ["203.0.113.10"]);
    expect((await net.dnsTable())["allowed.test"]).toEqual(["203.0.113.10"]);
    await expect(net.setDns("bad.test", ["not-an-ip"])).rejects.toThrow(/IPv4/);
  });

  it("resolves through the fake DNS for processes in the host namespace (resolv.conf)", async () => {
    expect((await host("getent", "ahostsv4", "other.test")).split(/\s+/)[0]).toBe("203.0.113.20");
  });

  it("logs every DNS query with name, type and source; clearLog empties it", async () => {
    await net.clearLog();
    expect(await net.log()).toEqual([]);
    await dig("denied.test");
    await dig("denied.test", "tcp", 28);
    const dns = (await net.log()).filter((e) => e.kind === "dns");
    expect(dns).toMatchObject([
      { kind: "dns", proto: "udp", name: "denied.test", type: "A", rcode: "NOERROR", answers: ["203.0.113.40"] },
      { kind: "dns", proto: "tcp", name: "denied.test", type: "AAAA", rcode: "NOERROR", answers: [] },
    ]);
    expect(dns.every((e) => e.source.startsWith("198.51.100.1:"))).toBe(true);
  });

  it("echoes UDP and TCP on port 7 of every server address, and logs the hits", async () => {
    await net.clearLog();
    for (const a of net.serverAddresses) {
      expect(await host(python, "-c", ECHO_PY, "udp", a, "7", `ping-${a}`)).toBe(`echo:ping-${a}`);
    }
    expect(await host(python, "-c", ECHO_PY, "tcp", "203.0.113.10", "7", "stream")).toBe("stream");
    const log = await net.log();
    expect(log.filter((e) => e.kind === "udp")).toHaveLength(4);
    expect(log).toContainEqual(expect.objectContaining({ kind: "udp", local: "203.0.113.40:7", payload: "ping-203.0.113.40" }));
    expect(log).toContainEqual(expect.objectContaining({ kind: "tcp", local: "203.0.113.10:7" }));
  });

  it("runs host services in the host namespace only", async () => {
    const local = await net.startHostService(0, "127.0.0.1");
    const any = await net.startHostService(0, "0.0.0.0");
    expect(await host("busybox", "wget", "-qO-", `http://127.0.0.1:${local.port}/x`)).toBe("host-secret");
    // The wildcard one is reachable on the host's uplink address, from the internet side too...
    const fromInet = await net.execInInet("busybox", ["wget", "-qO-", `http://${net.hostAddress}:${any.port}/`]);
    expect(fromInet.stdout).toBe("host-secret");
    // ...the loopback one is not, and the caller's own namespace sees neither.
    // (Its own loopback answers with a reset: nothing listens there. busybox wget would
    // segfault on any failed connect, so a crash would pass for "blocked".)
    const blocked = await net.execInInet(python, ["-c", ECHO_PY, "tcp", "127.0.0.1", String(local.port), "x"]);
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toMatch(/ConnectionRefusedError/);
    expect(local.hits).toMatchObject([{ method: "GET", path: "/x" }]);
    expect(any.hits).toHaveLength(1);
    expect(any.hits[0]?.source.startsWith(`${net.gatewayAddress}:`)).toBe(true);
    await local.close();
    await any.close();
  });

  it("close() removes both namespaces and their interfaces, and is idempotent", async () => {
    const sleeper = net.spawnInHost("sleep", ["600"]);
    const { hostNs, inetNs, hostIf, inetIf } = net;
    await Promise.all([net.close(), net.close()]);
    await net.close();
    expect(sleeper.exitCode !== null || sleeper.signalCode !== null).toBe(true);
    const list = execFileSync("ip", ["netns", "list"], { encoding: "utf8" });
    expect(list).not.toContain(hostNs);
    expect(list).not.toContain(inetNs);
    const links = execFileSync("ip", ["-o", "link"], { encoding: "utf8" });
    expect(links).not.toContain(hostIf);
    expect(links).not.toContain(inetIf);
    expect(existsSync(`/etc/netns/${hostNs}`)).toBe(false);
    await expect(net.log()).rejects.toThrow(/closed/);
  });
});
