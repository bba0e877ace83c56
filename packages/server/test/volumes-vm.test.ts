// Volumes mounted by real sandboxes through the API: a server with sandbox networks on (in a
// network namespace of its own, as network.test.ts runs it), NFS-Ganesha serving the volume.
// Three sandboxes share one volume read-write (two busybox, one debian); git clones and pip
// installs into it; a memory fork mounts it too, and a reset of that fork keeps it; a fork with
// volumes: "snapshot" sees it as it was and writes only its own copy; links a guest leaves are
// refused by the file API; every sandbox goes and the files stay, readable through the file API;
// a kill -9 of the server keeps them too; a guest filling the volume gets ENOSPC (its image's bound).
import { beforeAll, describe, expect, it } from "vitest";
import type { Api } from "./helpers.js";
import { fakeInternetUnavailableReason } from "./network/fake-internet.js";
import { networkedServerForFile } from "./network/host-server.js";
import { guestTools } from "./volume-tools.js";

const unavailable = fakeInternetUnavailableReason();
const SMALL = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const DEBIAN = { image: "sandtree/debian", memory_gb: 0.5, disk_size_gb: 2 };

describe.skipIf(unavailable !== null)(`volumes in sandboxes${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  // 64 MiB volume images (a test-only setting): the disk-full test fills one in seconds.
  const world = networkedServerForFile({ SANDTREE_NETWORK_SUBNET: "10.78.0.0/16", SANDTREE_VOLUME_IMAGE_MIB: "64" });
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
  const sh = async (id: string, command: string, timeout_seconds = 120) => {
    const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { stdout: string; stderr: string; exit_code: number };
  };
  const create = async (body: Record<string, unknown>) => {
    const r = await api("POST", "/v1/sandboxes", body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };

  beforeAll(async () => {
    api = world.server.api;
    const v = await api("POST", "/v1/volumes", { name: "shared", size_gb: 2 });
    expect(v.status, JSON.stringify(v.body)).toBe(201);
    vol = v.body.id;
    const mount = { volumes: [{ volume: "shared", path: "/mnt/shared" }] };
    // ids in the order asked, not the order answered: concurrent creates answer in any order,
    // and the cases below need ids[2] to be the debian one (once in CI a busybox sandbox was, so
    // its "git clone" failed at once: no glibc there, no python3 either).
    const made = await Promise.all([
      create({ ...SMALL, ...mount }),
      create({ ...SMALL, ...mount }),
      create({ ...DEBIAN, ...mount }),
    ]);
    ids.push(...made);
    const running = await Promise.all(ids.map((id) => waitRunning(id)));
    expect(running.map((sb) => sb.image)).toEqual([SMALL.image, SMALL.image, DEBIAN.image]);
  }, 600_000);

  it("three sandboxes see each other's files: a writer's fsync, then a reader's open", async () => {
    const [a, b, c] = ids as [string, string, string];
    await sh(a, "echo from-a > /mnt/shared/a.txt && sync /mnt/shared/a.txt");
    expect((await sh(b, "cat /mnt/shared/a.txt")).stdout).toBe("from-a\n");
    await sh(c, "echo from-c > /mnt/shared/c.txt && sync /mnt/shared/c.txt");
    expect((await sh(a, "cat /mnt/shared/a.txt /mnt/shared/c.txt")).stdout).toBe("from-a\nfrom-c\n");
    expect((await sh(b, "cat /mnt/shared/c.txt")).stdout).toBe("from-c\n");
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
    // The Sandbox answer lists its volumes.
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.volumes).toEqual([
      { volume_id: vol, name: "shared", path: "/mnt/shared", read_only: false },
    ]);
  });

  it("a guest filling its volume gets ENOSPC: the files stay whole, other volumes take writes", async () => {
    const [a, b] = ids as [string, string];
    const fill = await sh(a, "dd if=/dev/zero of=/mnt/shared/fill bs=1M count=100 conv=fsync; echo rc=$?", 300);
    expect(fill.stdout + fill.stderr).toMatch(/No space left on device/);
    expect(fill.stdout).not.toContain("rc=0");
    // What was there before is intact, as the other sandbox and the file API see it.
    expect((await sh(b, "cat /mnt/shared/a.txt")).stdout).toBe("from-a\n");
    const other = await api("POST", "/v1/volumes", { name: "other", size_gb: 1 });
    const put = await api("PUT", `/v1/volumes/${other.body.id}/files?path=/x`, Buffer.from("still room"));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect((await api("DELETE", `/v1/volumes/${other.body.id}`)).status).toBe(204);
    // Freed, the volume takes writes again.
    expect((await sh(a, "rm /mnt/shared/fill && echo ok > /mnt/shared/after && sync && cat /mnt/shared/after")).stdout).toBe(
      "ok\n",
    );
    await sh(a, "rm /mnt/shared/after");
    // And the space is back for every guest at once (the server holds no removed file open).
    for (const id of [a, b]) {
      const used = await sh(id, "df -k /mnt/shared | tail -1 | awk '{print $3}'");
      expect(Number(used.stdout), used.stdout + used.stderr).toBeLessThan(1024);
    }
  });

  it("git clones a repository and pip installs a wheel into the volume; the others read them", async () => {
    const [a, , c] = ids as [string, string, string];
    const tools = guestTools();
    const put = async (p: string, body: Buffer, mode = "644") => {
      const r = await api("PUT", `/v1/volumes/${vol}/files?path=${p}&mode=${mode}`, new Uint8Array(body));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    };
    await put("/w/bin/git", tools.git, "755");
    await put("/w/repo.bundle", tools.bundle);
    await put("/w/pip.whl", tools.pip);
    await put(`/w/${tools.wheel.name}`, tools.wheel.bytes);
    // The guest has no git: the host's binary runs from the volume (its own exec path).
    const git = "GIT_EXEC_PATH=/mnt/shared/w/bin /mnt/shared/w/bin/git";
    const clone = await sh(
      c,
      `cd /mnt/shared/w && ${git} clone -q repo.bundle repo && cd repo && ${git} log --format=%s && ${git} status --porcelain && cat README`,
      300,
    );
    // What failed says why: the command's stderr is the message.
    expect([clone.exit_code, clone.stdout], clone.stderr).toEqual([0, "two\none\none\ntwo\n"]);
    const pip = await sh(
      c,
      `cd /mnt/shared/w && python3 pip.whl/pip install -q --no-index --no-cache-dir --no-compile --disable-pip-version-check --target site ${tools.wheel.name} 2>&1 | grep -v WARNING; ` +
        `PYTHONPATH=/mnt/shared/w/site python3 -c 'import tinypkg; print(tinypkg.ANSWER)'`,
      300,
    );
    expect(pip.stdout.trim().split("\n").pop()).toBe("42");
    expect((await sh(a, "cat /mnt/shared/w/repo/README /mnt/shared/w/site/tinypkg/__init__.py")).stdout).toBe(
      "one\ntwo\nANSWER = 42\n",
    );
  }, 600_000);

  it("refuses, through the file API, links a guest left pointing out of the volume", async () => {
    const [a] = ids as [string];
    await sh(a, "ln -s /etc /mnt/shared/w/etc-link && ln -s ../../../.. /mnt/shared/w/up && sync");
    for (const p of ["/w/etc-link/passwd", "/w/up/etc/passwd", "/w/etc-link"]) {
      const r = await api("GET", `/v1/volumes/${vol}/files?path=${p}`);
      expect([p, r.status, r.body.code]).toEqual([p, 400, "UNSAFE_PATH"]);
    }
    const dots = await api("GET", `/v1/volumes/${vol}/files?path=/w/../../../etc/passwd`);
    expect([dots.status, dots.body.code]).toEqual([400, "INVALID_PATH"]);
    const up = await api("PUT", `/v1/volumes/${vol}/files?path=/w/up/tmp/x`, new Uint8Array([1]));
    expect([up.status, up.body.code]).toEqual([400, "UNSAFE_PATH"]);
    const st = await api("GET", `/v1/volumes/${vol}/files/stat?path=/w/etc-link`);
    expect(st.body).toMatchObject({ type: "symlink", target: "/etc" });
  });

  it("a memory fork mounts the same volume and shares it with its parent", async () => {
    const [a] = ids as [string];
    const f = await api("POST", `/v1/sandboxes/${a}/fork`, { memory: true });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    ids.push(f.body.id);
    await waitRunning(f.body.id);
    await sh(f.body.id, "echo from-child > /mnt/shared/child.txt && sync");
    expect((await sh(a, "cat /mnt/shared/child.txt /mnt/shared/a.txt")).stdout).toBe("from-child\nfrom-a\n");
    // A reset of the child to its checkpoint mounts the live volume again.
    const reset = await api("POST", `/v1/sandboxes/${f.body.id}/reset`, { checkpoint_id: f.body.source_checkpoint_id });
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    await waitRunning(f.body.id);
    await sh(a, "echo after-reset > /mnt/shared/after.txt && sync");
    expect((await sh(f.body.id, "cat /mnt/shared/child.txt /mnt/shared/after.txt")).stdout).toBe("from-child\nafter-reset\n");
    await sh(a, "rm /mnt/shared/after.txt");
  }, 400_000);

  it('a fork with volumes: "snapshot" sees the volume as it was; its writes and the parent\'s stay apart', async () => {
    const [a] = ids as [string];
    const f = await api("POST", `/v1/sandboxes/${a}/fork`, { volumes: "snapshot" });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    ids.push(f.body.id);
    const snap = f.body.volumes?.[0];
    expect(snap).toMatchObject({ path: "/mnt/shared", read_only: false });
    expect(snap.volume_id).not.toBe(vol);
    expect(snap.name).toMatch(/^shared-snap-/);
    await waitRunning(f.body.id);
    expect((await sh(f.body.id, "cat /mnt/shared/a.txt /mnt/shared/w/repo/README")).stdout).toBe("from-a\none\ntwo\n");
    await sh(f.body.id, "echo snap > /mnt/shared/a.txt && echo new > /mnt/shared/snap-only.txt && sync");
    await sh(a, "echo later > /mnt/shared/parent-later.txt && sync");
    expect((await sh(a, "cat /mnt/shared/a.txt; ls /mnt/shared/snap-only.txt 2>&1 | grep -c 'No such'")).stdout).toBe(
      "from-a\n1\n",
    );
    expect((await sh(f.body.id, "ls /mnt/shared/parent-later.txt 2>&1 | grep -c 'No such'")).stdout).toBe("1\n");
    await sh(a, "rm /mnt/shared/parent-later.txt");
    expect((await api("GET", `/v1/volumes/${snap.volume_id}/files?path=/snap-only.txt`)).body).toBe("new\n");
    // The snapshot is a volume of the team, held while the fork mounts it, deleted after.
    expect((await api("DELETE", `/v1/volumes/${snap.volume_id}`)).body.code).toBe("VOLUME_IN_USE");
    expect((await api("DELETE", `/v1/sandboxes/${f.body.id}`)).status).toBeLessThan(300);
    ids.splice(ids.indexOf(f.body.id), 1);
    for (let i = 0; i < 100 && (await api("GET", `/v1/volumes/${snap.volume_id}`)).body.mounted_by?.length; i++) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect((await api("DELETE", `/v1/volumes/${snap.volume_id}`)).status).toBe(204);
  }, 400_000);

  it("refuses a mount without a network, and keeps the files when every sandbox is gone", async () => {
    const off = await api("POST", "/v1/sandboxes", { ...SMALL, network: false, volumes: [{ volume: vol, path: "/v" }] });
    expect(off.status).toBe(409);
    expect(off.body.code).toBe("NETWORK_DISABLED");
    for (const id of ids) expect((await api("DELETE", `/v1/sandboxes/${id}`)).status).toBeLessThan(300);
    const list = await api("GET", `/v1/volumes/${vol}/files/list?path=/`);
    expect(list.body.entries.map((e: { path: string }) => e.path.split("/").pop()).sort()).toEqual([
      "a.txt",
      "c.txt",
      "child.txt",
      "dir",
      "w",
    ]);
  });

  it("keeps the files through a kill -9 of the server, and mounts them again", async () => {
    await world.server.kill("SIGKILL");
    await world.server.restart();
    const id = await create({ ...SMALL, volumes: [{ volume: vol, path: "/data", read_only: true }] });
    await waitRunning(id);
    expect((await sh(id, "cat /data/child.txt")).stdout).toBe("from-child\n");
    // Read-only: a write fails in the guest and nothing reaches the volume.
    expect((await sh(id, "echo x > /data/nope.txt")).exit_code).not.toBe(0);
    expect((await api("GET", `/v1/volumes/${vol}/files/stat?path=/nope.txt`)).status).toBe(404);
  });
});
