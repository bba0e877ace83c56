// The hostile-guest suite, network cases (docs/hostile-guests.md): root in a sandbox whose policy
// allows almost everything tries the host's own services (the API's port, an SSH port, a service
// on the host's loopback, the volume server without a mount grant), its neighbour, floods the
// gateway and the resolver, and claims its neighbour's and the gateway's addresses by ARP.
// Each is denied; afterwards the neighbour still resolves and connects, the server answers and
// its memory stayed bounded. Extends network.test.ts (sandboxes and the host's gateway, spoofed
// UDP, a DNS flood), which it does not repeat. A fake internet of network namespaces, as there.
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import type { Api } from "../helpers.js";
import { fakeInternetUnavailableReason } from "../network/fake-internet.js";
import { networkedServerForFile, runningWithProbe } from "../network/host-server.js";
import { MEMORY_GROWTH_MAX_MIB } from "./harness.js";

const PROBE = readFileSync(new URL("./network-probe.py", import.meta.url), "utf8");
const VOLUME_SERVER = "169.254.171.1";
const unavailable = fakeInternetUnavailableReason();

describe.skipIf(unavailable !== null)("a hostile guest on the network", () => {
  const world = networkedServerForFile({ SANDTREE_NETWORK_DEFAULT: "deny", SANDTREE_NETWORK_SUBNET: "10.78.0.0/16" });
  let api: Api;
  const ids: Record<string, string> = {};
  const views: Record<string, { address: string; gateway: string }> = {};
  let rssBefore = 0;

  const serverRssMiB = () => {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${world.server.proc().pid}/status`, "utf8"));
    return Number(m?.[1]) / 1024;
  };

  async function probe(id: string, ...args: string[]): Promise<string> {
    const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command: ["python3", "/tmp/probe.py", ...args] });
    if (r.status !== 200) throw new Error(`exec failed: ${r.status} ${JSON.stringify(r.body)}`);
    return String(r.body.stdout).trim();
  }

  async function create(body: Record<string, unknown>): Promise<string> {
    const r = await api("POST", "/v1/sandboxes", { image: "sandtree/debian", memory_gb: 0.375, ...body });
    if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`);
    const id = r.body.id as string;
    await runningWithProbe(api, id, PROBE, 1200);
    views[id] = (await api("GET", `/v1/sandboxes/${id}/network`)).body;
    return id;
  }

  /** The neighbour resolves and connects, the API answers, the server's memory stayed bounded. */
  async function expectNeighbourFine(): Promise<void> {
    expect(await probe(ids.neighbour as string, "dns", "allowed.test")).toBe("OK 203.0.113.10");
    expect(await probe(ids.neighbour as string, "tcp", "203.0.113.10", "80")).toBe("OK connected");
    expect((await api("GET", "/v1/sandboxes")).status).toBe(200);
    expect(serverRssMiB() - rssBefore).toBeLessThan(MEMORY_GROWTH_MAX_MIB);
  }

  beforeAll(async () => {
    api = world.server.api;
    // The hostile sandbox's policy allows all but one name: what stops it is not its policy.
    [ids.hostile, ids.neighbour] = await Promise.all([
      create({ network_denylist: ["denied.test"] }),
      create({ network_allowlist: ["allowed.test"] }),
    ]);
    rssBefore = serverRssMiB();
  }, 600_000);

  it("reaches none of the host's services: the API's port, SSH, the host's loopback, the volume server", {
    timeout: 180_000,
  }, async () => {
    const ssh = await world.inet.startHostService(22, "0.0.0.0");
    const loopback = await world.inet.startHostService(0, "127.0.0.1");
    const hostile = ids.hostile as string;
    const gw = views[hostile]?.gateway as string;
    const targets: Array<[string, string]> = [
      [gw, String(world.server.port)],
      [world.inet.hostAddress, String(world.server.port)],
      [gw, "22"],
      [world.inet.hostAddress, "22"],
      [gw, String(loopback.port)],
      [VOLUME_SERVER, "2049"],
      [VOLUME_SERVER, "111"],
      [VOLUME_SERVER, String(world.server.port)],
      [views[ids.neighbour as string]?.address as string, "22"],
    ];
    const seen: string[] = [];
    for (const [host, port] of targets) seen.push(`${host}:${port} ${await probe(hostile, "tcp", host, port)}`);
    expect(seen.filter((s) => !s.endsWith("ERR timeout"))).toEqual([]);
    expect(ssh.hits).toEqual([]);
    expect(loopback.hits).toEqual([]);
    await Promise.all([ssh.close(), loopback.close()]);
    await expectNeighbourFine();
  });

  it("floods the gateway and the resolver over UDP and TCP; the neighbour still resolves and connects", {
    timeout: 240_000,
  }, async () => {
    const hostile = ids.hostile as string;
    const gw = views[hostile]?.gateway as string;
    // The flood is the attacker's: containment and the neighbour are what is asserted. A flood
    // whose own sends blocked (its NIC's queue stopped draining: seen once in CI, not understood
    // yet) ends there and says so, with its NIC's counters, instead of hanging the case.
    for (const [target, port] of [
      ["resolver", "53"],
      [gw, "any"],
    ] as const) {
      const sent = await probe(hostile, "udpflood", target, port, "5000");
      expect(sent).toMatch(/^(OK sent 5000|STALLED after \d+: .*)$/);
      if (sent.startsWith("STALLED")) console.warn(`udp flood at ${target}:${port}: ${sent}`);
    }
    expect(await probe(hostile, "synflood", gw, "53", "500")).toBe("OK tried 500");
    expect(await probe(hostile, "synflood", gw, String(world.server.port), "500")).toBe("OK tried 500");
    await expectNeighbourFine();
  });

  it("ARP spoofing of the neighbour's and the gateway's addresses changes nothing for the neighbour", {
    timeout: 180_000,
  }, async () => {
    const hostile = ids.hostile as string;
    const neighbourAddr = views[ids.neighbour as string]?.address as string;
    const gw = views[hostile]?.gateway as string;
    expect(await probe(hostile, "arpspoof", neighbourAddr, "50")).toBe("OK sent 50");
    expect(await probe(hostile, "arpspoof", gw, "50")).toBe("OK sent 50");
    // The host knows the neighbour's address on the neighbour's tap only: the replies on the
    // impostor's own tap made no entry there. (Every sandbox may have the same MAC: each tap is
    // its own link, so the device, not the MAC, tells them apart.)
    const ntap = world.server
      .hostNs("ip", "-o", "-4", "addr", "show", "to", views[ids.neighbour as string]?.gateway as string)
      .split(/\s+/)[1] as string;
    const entries = world.server.hostNs("ip", "neigh", "show", "to", neighbourAddr).trim().split("\n").filter(Boolean);
    expect(entries.filter((e) => !e.includes(`dev ${ntap} `))).toEqual([]);
    await expectNeighbourFine();
  });
});
