// Volumes mounted by real sandboxes through the API: a server with sandbox networks on (in a
// network namespace of its own, as network.test.ts runs it), NFS-Ganesha serving the volume.
// Two sandboxes share one volume read-write; a memory fork mounts it too; every sandbox goes and
// the files stay, readable through the file API; a kill -9 of the server keeps them too.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Api } from "./helpers.js";
import { createFakeInternet, type FakeInternet, fakeInternetUnavailableReason } from "./network/fake-internet.js";
import { type HostServer, startHostServer } from "./network/host-server.js";

const unavailable = fakeInternetUnavailableReason();
const SMALL = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };

describe.skipIf(unavailable !== null)(`volumes in sandboxes${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let inet: FakeInternet;
  let server: HostServer;
  let api: Api;
  let vol: string;
  const ids: string[] = [];

  const waitRunning = async (id: string) => {
    const deadline = Date.now() + 300_000;
    for (;;) {
      const r = await api("GET", `/v1/sandboxes/${id}`);
      if (r.body.status === "RUNNING") return r.body;
      if (["ERROR", "TERMINATED", "TIMEOUT"].includes(r.body.status))
        throw new Error(`${id}: ${r.body.status} ${r.body.error_reason}`);
      if (Date.now() > deadline) throw new Error(`${id} never ran`);
      await new Promise((res) => setTimeout(res, 250));
    }
  };
  const sh = async (id: string, command: string) => {
    const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds: 120 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { stdout: string; stderr: string; exit_code: number };
  };
  const create = async (body: Record<string, unknown>) => {
    const r = await api("POST", "/v1/sandboxes", body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    ids.push(r.body.id);
    return r.body.id as string;
  };

  beforeAll(async () => {
    inet = await createFakeInternet();
    server = await startHostServer(inet, { SANDTREE_NETWORK_SUBNET: "10.78.0.0/16" });
    api = server.api;
    const v = await api("POST", "/v1/volumes", { name: "shared", size_gb: 2 });
    expect(v.status, JSON.stringify(v.body)).toBe(201);
    vol = v.body.id;
    const mount = { volumes: [{ volume: "shared", path: "/mnt/shared" }] };
    const [a, b] = await Promise.all([create({ ...SMALL, ...mount }), create({ ...SMALL, ...mount })]);
    await Promise.all([waitRunning(a as string), waitRunning(b as string)]);
  }, 600_000);

  afterAll(async () => {
    await inet?.close();
    server?.close();
  }, 120_000);

  it("two sandboxes see each other's files: a writer's fsync, then a reader's open", async () => {
    const [a, b] = ids as [string, string];
    await sh(a, "echo from-a > /mnt/shared/a.txt && sync /mnt/shared/a.txt");
    expect((await sh(b, "cat /mnt/shared/a.txt")).stdout).toBe("from-a\n");
    await sh(
      b,
      "mkdir -p /mnt/shared/dir && echo from-b > /mnt/shared/dir/b.txt && mv /mnt/shared/dir/b.txt /mnt/shared/dir/c.txt && sync",
    );
    expect((await sh(a, "cat /mnt/shared/dir/c.txt; ls /mnt/shared/dir")).stdout).toBe("from-b\nc.txt\n");
    // The mount is the volume's: the file API reads what a guest wrote.
    const got = await api("GET", `/v1/volumes/${vol}/files?path=/dir/c.txt`);
    expect(got.status).toBe(200);
    expect(Buffer.from(got.body as Uint8Array).toString()).toBe("from-b\n");
    // And the volume says who mounts it; it cannot be deleted meanwhile.
    const del = await api("DELETE", `/v1/volumes/${vol}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe("VOLUME_IN_USE");
  });

  it("a memory fork mounts the same volume and shares it with its parent", async () => {
    const [a] = ids as [string];
    const f = await api("POST", `/v1/sandboxes/${a}/fork`, { memory: true });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    ids.push(f.body.id);
    await waitRunning(f.body.id);
    await sh(f.body.id, "echo from-child > /mnt/shared/child.txt && sync");
    expect((await sh(a, "cat /mnt/shared/child.txt /mnt/shared/a.txt")).stdout).toBe("from-child\nfrom-a\n");
  });

  it("refuses a mount without a network, and keeps the files when every sandbox is gone", async () => {
    const off = await api("POST", "/v1/sandboxes", { ...SMALL, network: false, volumes: [{ volume: vol, path: "/v" }] });
    expect(off.status).toBe(409);
    expect(off.body.code).toBe("NETWORK_DISABLED");
    for (const id of ids) expect((await api("DELETE", `/v1/sandboxes/${id}`)).status).toBeLessThan(300);
    const list = await api("GET", `/v1/volumes/${vol}/files/list?path=/`);
    expect(list.body.entries.map((e: { path: string }) => e.path.split("/").pop()).sort()).toEqual(["a.txt", "child.txt", "dir"]);
  });

  it("keeps the files through a kill -9 of the server, and mounts them again", async () => {
    await server.kill("SIGKILL");
    await server.restart();
    const id = await create({ ...SMALL, volumes: [{ volume: vol, path: "/data", read_only: true }] });
    await waitRunning(id);
    expect((await sh(id, "cat /data/child.txt")).stdout).toBe("from-child\n");
    // Read-only: a write fails in the guest and nothing reaches the volume.
    expect((await sh(id, "echo x > /data/nope.txt")).exit_code).not.toBe(0);
    expect((await api("GET", `/v1/volumes/${vol}/files/stat?path=/nope.txt`)).status).toBe(404);
  });
});
