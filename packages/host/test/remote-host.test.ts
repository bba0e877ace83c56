// What the remote host adds to the conformance suite (conformance/remote-*.test.ts): who may call
// a worker's host, what a caller sees when the worker is gone, and that the host's own errors
// arrive as the classes the in-process host throws. Over loopback to a FakeHost (no VM).
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FakeHost } from "../src/fake.js";
import {
  CheckpointFailedError,
  type EgressPolicy,
  MachineRefusedError,
  type MachineSpec,
  writeRootfsLayout,
} from "../src/index.js";
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "../src/remote.js";
import { fakeSpec } from "./conformance/fake-subject.js";
import { importRaw } from "./helpers/raw-import.js";
import { type ServedFake, serveFakeHost } from "./helpers/served-fake.js";

describe("remote host", () => {
  let fixture: ServedFake;
  let dir: string;
  let fake: FakeHost;
  let worker: ServedHost;
  let host: RemoteHost;
  let base: string;
  let key = "stw_first-key";
  const current = () => key;
  const spec = (name: string): MachineSpec => fakeSpec()(name, `${name}.qcow2`);

  beforeAll(async () => {
    fixture = await serveFakeHost("sandtree-remote-", current);
    ({ dir, fake, worker, host } = fixture);
    // The image base the tests' disks lie on (a host links only a base it has), by its name.
    base = (await fake.images.resolve("sandtree/busybox", {})).base;
  });
  afterAll(() => fixture?.close());

  it("refuses a caller without the worker's current key", async () => {
    await expect(connectRemoteHost({ url: worker.url, key: "stw_wrong" })).rejects.toMatchObject({ code: "UNAUTHORIZED" });
    // The key changes when the worker registers again: a client holding the old one is refused from then on.
    const pinned = await connectRemoteHost({ url: worker.url, key });
    await expect(pinned.survivors()).resolves.toEqual([]);
    key = "stw_second-key";
    await expect(pinned.survivors()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
    pinned.close();
  });

  it("says WORKER_UNREACHABLE when nothing answers", async () => {
    const gone = await serveMachineHost({ host: new FakeHost(), key: () => key, networksDir: path.join(dir, "gone-networks") });
    await gone.close();
    await expect(connectRemoteHost({ url: gone.url, key })).rejects.toMatchObject({ code: "WORKER_UNREACHABLE" });
  });

  it("carries whether the worker's machines may mount volumes, and why not", async () => {
    expect(host.capabilities.volumes).toEqual(fake.capabilities.volumes);
    expect(host.capabilities.volumes).toMatchObject({ ok: false, why: expect.stringContaining("fake host") });
    // A worker whose host serves volumes (its own file server, over its networks) says so.
    const serving = new FakeHost({ dir: path.join(dir, "serving-host") });
    Object.defineProperty(serving, "capabilities", { value: { ...serving.capabilities, volumes: { ok: true } } });
    const w = await serveMachineHost({ host: serving, key: () => key, networksDir: path.join(dir, "serving-networks") });
    const remote = await connectRemoteHost({ url: w.url, key: current });
    expect(remote.capabilities).toEqual({ ...fake.capabilities, volumes: { ok: true } });
    remote.close();
    await w.close();
  });

  it("asks again what the worker's host can do once its networks opened (its file server opens with them)", async () => {
    const served = new FakeHost({ dir: path.join(dir, "opening-host") });
    let opened = false;
    const fixed = served.capabilities;
    Object.defineProperty(served, "capabilities", {
      get: () => ({ ...fixed, volumes: opened ? { ok: true } : { ok: false, why: "its networks are not open" } }),
    });
    const open = served.networks.open.bind(served.networks);
    vi.spyOn(served.networks, "open").mockImplementation(async (req) => {
      opened = true;
      return open(req);
    });
    const w = await serveMachineHost({ host: served, key: () => key, networksDir: path.join(dir, "opening-networks") });
    const remote = await connectRemoteHost({ url: w.url, key: current });
    expect(remote.capabilities.volumes).toEqual({ ok: false, why: "its networks are not open" });
    await remote.networks.open({ dataDir: path.join(dir, "caller-data"), enabled: "auto", dnsUpstreams: [], live: [] });
    expect(remote.capabilities).toEqual({ ...fixed, volumes: { ok: true } });
    await remote.networks.close({ destroy: true });
    remote.close();
    await w.close();
  });

  it("gives the worker's host each mount's volume by name (no path crosses), for a start and an adoption", async () => {
    const got: unknown[] = [];
    vi.spyOn(fake, "start").mockImplementationOnce(async (s) => {
      got.push(s.mounts);
      throw new MachineRefusedError("recorded");
    });
    vi.spyOn(fake, "adopt").mockImplementationOnce(async (s) => {
      got.push(s.mounts);
      throw new MachineRefusedError("recorded");
    });
    const mounts = [
      { volume: "vol-0123456789abcdef", guestPath: "/data" },
      { volume: "vol-fedcba9876543210", guestPath: "/ro", readOnly: true },
    ];
    await expect(host.start({ ...spec("vols"), mounts })).rejects.toBeInstanceOf(MachineRefusedError);
    await expect(host.adopt({ name: "vols", pid: 1, deadlineMs: 1000, keepPaused: false, mounts })).rejects.toBeInstanceOf(
      MachineRefusedError,
    );
    expect(got).toEqual([mounts, mounts]);
  });

  it("hands the host's errors back as the classes it throws in-process", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "e.qcow2", 1 << 30);
    const m = await host.start(spec("e"));
    await expect(host.start(spec("e"))).rejects.toBeInstanceOf(MachineRefusedError);
    await expect(m.stat("/nope")).rejects.toMatchObject({ name: "GuestError", errnoCode: "ENOENT" });
    await m.stop();
    const ck = { nextDisk: "e-1.qcow2", diskSizeBytes: 1 << 30, freezeDeadlineMs: 1000 };
    await expect(m.checkpoint(ck)).rejects.toBeInstanceOf(CheckpointFailedError);
    await expect(m.pause()).rejects.toBeInstanceOf(MachineRefusedError);
  });

  it("sends no template (a template's files are its host's own): a start naming one is refused before it is sent", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "t.qcow2", 1 << 30);
    const starts = fake.starts;
    const template = { ramFile: path.join(dir, "ram"), stateFile: path.join(dir, "state") };
    await expect(host.start({ ...spec("t"), template })).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
    expect(fake.starts).toBe(starts);
    const m = await host.start(spec("t"));
    await m.stop();
  });

  it("refuses to store or fetch layers when the worker serves its host without a blob store", async () => {
    writeFileSync(path.join(dir, "ck-no-store"), "a layer");
    await expect(host.layers().store("ck-no-store")).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
    await expect(host.layers().fetch("ck-no-store", "0".repeat(64))).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
  });

  it("reads a console log only by a machine's name (never a caller's path), and a bounded tail", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "c.qcow2", 1 << 30);
    const m = await host.start(spec("c"));
    await m.stop();
    const whole = await host.consoleTail("c", 4096);
    expect(whole.text).toBe("fake machine c started\nfake machine c stopped\n");
    expect(await host.consoleTail("c", 8)).toEqual({ text: "stopped\n", size: whole.size });
    const logDir = path.join(dir, "host", "logs", "c");
    for (const bad of ["logs/c", "../c", "c/", logDir, `${logDir}/../c`])
      await expect(host.consoleTail(bad, 100), bad).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
    await expect(host.consoleTail("c", 16 * 1024 * 1024 + 1)).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
    await expect(host.consoleTail("c", 0)).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
  });

  it("streams events: an exit on the worker reaches the caller; closing the client leaves machines running", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "w.qcow2", 1 << 30);
    const m = await host.start(spec("w"));
    const exited = new Promise((resolve) => m.once("exit", resolve));
    fake.machines.get("w")?.forceKill();
    await expect(exited).resolves.toMatchObject({ expected: false, reason: "killed" });
    expect(m.controllable).toBe(false);

    await host.createDisk(linked, "k.qcow2", 1 << 30);
    const other = await connectRemoteHost({ url: worker.url, key: current });
    const k = await other.start(spec("k"));
    other.close();
    expect((await host.survivors()).map((s) => s.name)).toContain("k");
    expect(k.exit).toBeNull();
    const adopted = await host.adopt({
      name: "k",
      pid: k.pid,
      deadlineMs: 5000,
      keepPaused: false,
    });
    expect(adopted.adoptedRunState).toBe("running");
    await adopted.stop();
  });

  it("carries a command's output in order, larger than one message", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "o.qcow2", 1 << 30);
    const m = await host.start(spec("o"));
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, "x");
    big.write("START", 0);
    big.write("END", big.length - 3);
    await m.writeFile(
      "/root/big",
      (async function* () {
        for (let off = 0; off < big.length; off += 100_000) yield big.subarray(off, off + 100_000);
      })(),
    );
    const parts: Buffer[] = [];
    for await (const ev of m.exec({ shell: "cat /root/big" }).events) if (ev.type === "stdout") parts.push(ev.data);
    expect(parts.length).toBeGreaterThan(1);
    expect(Buffer.concat(parts).equals(big)).toBe(true);
    await m.stop();
  });

  it("carries a connection's bytes both ways, more than the transport's windows hold, in order", async () => {
    const linked = await host.linkBase(base);
    await host.createDisk(linked, "c.qcow2", 1 << 30);
    const m = await host.start({ ...spec("c"), nic: { tap: "fake0", guestNet: "10.0.0.2/30 10.0.0.1" } });
    const listener = m.exec({ shell: "nc -l -p 80 -e cat" });
    // The fake's command listens from its start on.
    expect((await listener.events[Symbol.asyncIterator]().next()).value).toMatchObject({ type: "started" });
    const sock = await m.connect(80);
    const big = Buffer.alloc(8 * 1024 * 1024 + 5);
    for (let i = 0; i + 4 <= big.length; i += 4) big.writeUInt32BE(i, i);
    const got: Buffer[] = [];
    sock.on("data", (c: Buffer) => got.push(c));
    const ended = new Promise<void>((resolve) => sock.once("end", resolve));
    // Written as fast as the stream takes it: each write waits while the stream says it is full.
    for (let off = 0; off < big.length; off += 256 * 1024) {
      if (!sock.write(big.subarray(off, off + 256 * 1024))) await new Promise((r) => sock.once("drain", r));
    }
    sock.end();
    await ended;
    expect(Buffer.concat(got).equals(big)).toBe(true);
    listener.signal(15);
    await m.stop();
  });

  it("serves more machines than HTTP/2's usual 100 streams over one connection (each holds a Watch)", async () => {
    const linked = await host.linkBase(base);
    const names = Array.from({ length: 150 }, (_, i) => `many-${i}`);
    const machines = await Promise.all(
      names.map(async (n) => {
        await host.createDisk(linked, `${n}.qcow2`, 1 << 30);
        return host.start(spec(n));
      }),
    );
    const outs = await Promise.all(
      machines.map(async (m) => {
        let out = "";
        for await (const ev of m.exec({ shell: `echo ${m.name}` }).events) if (ev.type === "stdout") out += ev.data.toString();
        return out;
      }),
    );
    expect(outs).toEqual(names.map((n) => `${n}\n`));
    await Promise.all(machines.map((m) => m.stop()));
    expect(machines.every((m) => m.exit?.expected === true)).toBe(true);
  });

  it("carries each image call's registry credentials to the worker's images", async () => {
    const creds = { username: "alice", password: "s3cret" };
    const resolve = vi.spyOn(fake.images, "resolve");
    const check = vi.spyOn(fake.images, "check");
    const img = await host.images.resolve("sandtree/busybox", { credentials: creds });
    expect(img).toEqual(await fake.images.resolve("sandtree/busybox", {}));
    await host.images.check("sandtree/busybox", { credentials: creds });
    expect(resolve).toHaveBeenCalledWith("sandtree/busybox", expect.objectContaining({ credentials: creds }));
    expect(check).toHaveBeenCalledWith("sandtree/busybox", expect.objectContaining({ credentials: creds }));
    await host.images.check("sandtree/busybox", {});
    expect(check).toHaveBeenLastCalledWith("sandtree/busybox", expect.not.objectContaining({ credentials: expect.anything() }));
    resolve.mockRestore();
    check.mockRestore();
  });

  it("sends a layout of many messages whole to the worker, which removes its copy after the import", async () => {
    const rootfs = path.join(dir, "big-rootfs");
    mkdirSync(rootfs);
    writeFileSync(path.join(rootfs, "big"), randomBytes(3 << 20));
    const layout = path.join(dir, "big-layout");
    await writeRootfsLayout(rootfs, layout, { refName: "v1", compression: "none" });
    const sums = (d: string) =>
      (readdirSync(d, { recursive: true, withFileTypes: true }) as Array<{ isFile(): boolean; parentPath: string; name: string }>)
        .filter((e) => e.isFile())
        .map(
          (e) =>
            `${path.relative(d, path.join(e.parentPath, e.name))} ${createHash("sha256")
              .update(readFileSync(path.join(e.parentPath, e.name)))
              .digest("hex")}`,
        )
        .sort();
    let received: { dir: string; sums: string[] } | undefined;
    const original = fake.images.importLayout.bind(fake.images);
    const spy = vi.spyOn(fake.images, "importLayout").mockImplementation(async (d, name, opts) => {
      received = { dir: d, sums: sums(d) };
      return original(d, name, opts);
    });
    const imported = await host.images.importLayout(layout, "sandtree/big", { layoutRef: "v1" });
    spy.mockRestore();
    // oci-layout, index.json and the blobs: manifest, config and the 3 MiB layer.
    expect(sums(layout).length).toBeGreaterThanOrEqual(5);
    expect(received?.sums).toEqual(sums(layout));
    expect(received && existsSync(received.dir)).toBe(false);
    expect(await host.images.resolve("sandtree/big", {})).toMatchObject({ digest: imported.digest });
  });

  it("refuses an import whose bytes are no tar (IMAGE_INVALID) before the host's images see it", async () => {
    const imports = vi.spyOn(fake.images, "importLayout");
    const err = await importRaw(worker.url, key, "sandtree/garbage", [randomBytes(4096)]);
    expect(err).toMatchObject({ code: "IMAGE_INVALID" });
    expect(imports).not.toHaveBeenCalled();
    imports.mockRestore();
  });

  it("opens the worker's networks in its own directory; why it has none, and its template taps, cross too", async () => {
    const open = vi.spyOn(fake.networks, "open");
    const close = vi.spyOn(fake.networks, "close");
    const req = { dataDir: path.join(dir, "caller-data"), dnsUpstreams: ["192.0.2.53"], live: [] };
    await expect(host.networks.open({ ...req, enabled: "auto", subnet: "10.78.0.0/24" })).resolves.toEqual({
      subnet: "10.78.0.0/24",
      unavailable: null,
      skipped: [],
      attached: [],
    });
    expect(open).toHaveBeenLastCalledWith(
      expect.objectContaining({ dataDir: path.join(dir, "networks"), dnsUpstreams: ["192.0.2.53"], enabled: "auto" }),
    );
    expect(existsSync(path.join(dir, "networks"))).toBe(true);
    expect(existsSync(req.dataDir)).toBe(false);

    // Opened again without a close (the caller restarted): the worker closes them first, keeping taps and rules.
    open.mockResolvedValueOnce({ subnet: null, unavailable: "no nft on this worker" });
    await expect(host.networks.open({ ...req, enabled: "auto" })).resolves.toEqual({
      subnet: null,
      unavailable: "no nft on this worker",
    });
    expect(close.mock.calls).toEqual([[{ destroy: false }]]);
    open.mockRejectedValueOnce(new Error("sandbox networking is unavailable: no nft on this worker"));
    await expect(host.networks.open({ ...req, enabled: "on" })).rejects.toThrow(
      "sandbox networking is unavailable: no nft on this worker",
    );
    expect(close).toHaveBeenCalledTimes(1);
    open.mockRestore();
    close.mockRestore();

    const tap = await host.networks.taps.acquire();
    expect(tap).toMatch(/^fake-t/);
    await expect(host.networks.taps.release(tap)).resolves.toBeUndefined();
    // What protobuf cannot check is checked before the worker's networks see it.
    const update = vi.spyOn(fake.networks, "update");
    const bad = { mode: "everything", allow: [], deny: [] } as unknown as EgressPolicy;
    await expect(host.networks.update("sb-x", { policy: bad, generation: 2 })).rejects.toBeInstanceOf(MachineRefusedError);
    expect(update).not.toHaveBeenCalled();
    update.mockRestore();
    await host.networks.close({ destroy: false });
  });

  it("refuses to open the worker's networks while its own server holds them (NETWORK_UNAVAILABLE)", async () => {
    const req = { dataDir: path.join(dir, "caller-data"), dnsUpstreams: [], live: [] };
    // In-process, as the worker's own server opens them.
    await fake.networks.open({ ...req, dataDir: path.join(dir, "worker-data"), enabled: "on" });
    await expect(host.networks.open({ ...req, enabled: "auto" })).rejects.toMatchObject({ code: "NETWORK_UNAVAILABLE" });
    await fake.networks.close();
    await expect(host.networks.open({ ...req, enabled: "on" })).resolves.toMatchObject({ unavailable: null });
    await host.networks.close({ destroy: false });
  });
});
