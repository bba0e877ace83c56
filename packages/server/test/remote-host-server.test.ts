// The whole server on a remote host: its machines run on a "worker" (the host service over a
// FakeHost, on loopback) and every call of the services (start, exec, files, checkpoint with
// memory, fork, reset, delete) crosses the network through RemoteHost. Shows the services need
// nothing of a host but the interface, wherever it runs; with networks on, the worker's networks
// port hands its sandboxes addresses. No VM: about a second.
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { lifeCycle, onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

const COUNT = 12;

describe("the server on a remote host", () => {
  let t: TestServer;
  const fake = onFakeHost({ digestChar: "b", remote: true, started: (server) => void (t = server) });

  it(`creates, checkpoints, forks, resets and deletes ${COUNT} sandboxes through it`, { timeout: 120_000 }, async () => {
    await Promise.all(
      Array.from({ length: COUNT }, (_, i) =>
        lifeCycle(t, `r${i}`, i, async (id) => {
          const stat = await t.api("GET", `/v1/sandboxes/${id}/files/stat?path=/root/n`);
          expect(stat.body, JSON.stringify(stat.body)).toMatchObject({ type: "file", size: String(i).length + 1 });
        }),
      ),
    );
    // Every machine the server started on the worker is stopped there.
    expect(fake.starts).toBe(3 * COUNT);
    expect(fake.machines.size).toBe(0);
  });

  it("makes, fills, reads, measures and deletes a volume in the worker host's volumes directory, never the server's", {
    timeout: 60_000,
  }, async () => {
    const made = await t.api("POST", "/v1/volumes", { name: "on-worker", size_gb: 1 });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const id = made.body.id as string;
    const f = (route: string, p: string, extra = "") => `/v1/volumes/${id}/${route}?path=${encodeURIComponent(p)}${extra}`;
    const writes = vi.spyOn(fake.volumes, "write");
    const put = await t.api("PUT", f("files", "/d/a.txt"), new TextEncoder().encode("hello worker"));
    expect(put.body).toEqual({ path: "/d/a.txt", bytes: 12 });
    expect(writes).toHaveBeenCalledTimes(1);
    // The file lies on the worker's host, read through its volumes port; nothing in the server's data dir.
    expect(await fake.volumes.stat(id, "/d/a.txt")).toMatchObject({ type: "file", size: 12 });
    expect(existsSync(path.join(t.dataDir, "volumes", id))).toBe(false);
    expect((await t.api("GET", f("files", "/d/a.txt", "&offset=6&length=6"))).body).toBe("worker");
    expect((await t.api("GET", f("files", "/nope"))).body.code).toBe("FILE_NOT_FOUND");
    expect((await t.api("GET", f("files/list", "/d"))).body.entries.map((e: { path: string }) => e.path)).toEqual(["/d/a.txt"]);
    expect((await t.api("GET", `/v1/volumes/${id}`)).body.used_bytes).toBe(12);
    // A refusal of the worker's host answers with its details, as a local host's does.
    expect((await t.api("GET", f("files", "/nope"))).body).toMatchObject({ code: "FILE_NOT_FOUND", details: { path: "/nope" } });
    vi.spyOn(fake.volumes, "usedBytes").mockResolvedValueOnce(1024 ** 3 - 4);
    const over = await t.api("PUT", f("files", "/d/big"), new Uint8Array(10));
    expect([over.status, over.body]).toMatchObject([
      507,
      { code: "VOLUME_FULL", details: { path: "/d/big", limit_bytes: 1024 ** 3 } },
    ]);
    expect((await t.api("DELETE", `/v1/volumes/${id}`)).status).toBe(204);
    await expect(fake.volumes.stat(id, "/")).rejects.toThrow();
  });

  it("answers a sandbox's console log from the host, while it runs and once it ended", { timeout: 60_000 }, async () => {
    const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image", name: "logs" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    await running(t, id);
    // Read by the worker's host (here its files are this machine's too: the call shows it went there).
    const reads = vi.spyOn(fake, "consoleTail");
    const live = await t.api("GET", `/v1/sandboxes/${id}/logs`);
    expect(reads).toHaveBeenCalledTimes(1);
    expect(live.body).toMatchObject({
      sandbox_id: id,
      console: `fake machine sandtree-${id} started\n`,
      console_truncated: false,
    });
    expect(live.body.events.length).toBeGreaterThan(0);
    expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).status).toBe(200);
    const ended = await t.api("GET", `/v1/sandboxes/${id}/logs`);
    expect(ended.body.console).toBe(`fake machine sandtree-${id} started\nfake machine sandtree-${id} stopped\n`);
    const end = await t.api("GET", `/v1/sandboxes/${id}/logs?tail_bytes=8`);
    expect([end.body.console, end.body.console_truncated]).toEqual(["stopped\n", true]);
  });
});

describe("the server on a remote host with sandbox networks on", () => {
  let t: TestServer;
  const fake = onFakeHost({ digestChar: "c", remote: true, network: "on", started: (server) => void (t = server) });

  it("gives a sandbox an address of the worker's pool, attached and detached there", async () => {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image", network_allowlist: ["example.com"] });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    await running(t, c.body.id);
    const v = await t.api("GET", `/v1/sandboxes/${c.body.id}/network`);
    expect(v.body).toMatchObject({ enabled: true, mode: "allowlist", applied: true });
    expect(v.body.address).toMatch(/^10\.250\.\d+\.\d+$/);
    expect(fake.networks.live.get(c.body.id)?.policy).toEqual({ mode: "allowlist", allow: ["example.com"], deny: [] });
    expect((await t.api("DELETE", `/v1/sandboxes/${c.body.id}`)).status).toBeLessThan(300);
    for (let i = 0; i < 200 && fake.networks.live.has(c.body.id); i++) await new Promise((r) => setTimeout(r, 10));
    expect(fake.networks.live.has(c.body.id)).toBe(false);
  });
});
