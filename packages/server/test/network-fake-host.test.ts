// Sandbox networks through the real server on the fake host, whose networks port hands out
// addresses in memory (no tap, rule or resolver): what the control plane keeps (the record, its
// slot, generation and `applied`) and what it tells the host (attach, update, detach).
import { describe, expect, it } from "vitest";
import { onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

describe("sandbox networks on the fake host's networks port", () => {
  let t: TestServer;
  const host = onFakeHost({ digestChar: "d", network: "on", started: (server) => void (t = server) });

  it("gives a sandbox an address of the host's pool, its policy applied there", async () => {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image", network_allowlist: ["example.com"] });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    await running(t, c.body.id);
    const v = await t.api("GET", `/v1/sandboxes/${c.body.id}/network`);
    expect(v.body).toMatchObject({ enabled: true, mode: "allowlist", network_allowlist: ["example.com"], applied: true });
    expect(v.body.address).toMatch(/^10\.250\.\d+\.\d+$/);
    expect(v.body.gateway).toMatch(/^10\.250\.\d+\.\d+$/);
    expect(host.networks.live.get(c.body.id)?.policy).toEqual({ mode: "allowlist", allow: ["example.com"], deny: [] });
  });

  it("updates the policy on the host, the address kept; deleting the sandbox detaches it", async () => {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    await running(t, c.body.id);
    const before = (await t.api("GET", `/v1/sandboxes/${c.body.id}/network`)).body;
    const u = await t.api("PUT", `/v1/sandboxes/${c.body.id}/network`, { network_denylist: ["evil.example"] });
    expect(u.status, JSON.stringify(u.body)).toBe(200);
    expect(u.body).toMatchObject({
      mode: "denylist",
      network_denylist: ["evil.example"],
      applied: true,
      address: before.address,
    });
    expect(host.networks.live.get(c.body.id)).toMatchObject({
      policy: { mode: "denylist", deny: ["evil.example"] },
      generation: 2,
    });
    expect((await t.api("DELETE", `/v1/sandboxes/${c.body.id}`)).status).toBeLessThan(300);
    for (let i = 0; i < 200 && host.networks.live.has(c.body.id); i++) await new Promise((r) => setTimeout(r, 10));
    expect(host.networks.live.has(c.body.id)).toBe(false);
  });

  it("gives two sandboxes different addresses", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
      await running(t, c.body.id);
      ids.push(c.body.id);
    }
    const addrs = await Promise.all(ids.map(async (id) => (await t.api("GET", `/v1/sandboxes/${id}/network`)).body.address));
    expect(new Set(addrs).size).toBe(2);
  });
});
