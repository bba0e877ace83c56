// One conformance suite for every MachineHost (docs/architecture.md, "the seam"): what the server
// relies on, checked through the interface only. Each implementation runs it with its own factory
// (fake-host.test.ts, qemu-host.test.ts). Few machines (two at a time at most) so a VM host stays
// quick under TCG; the commands run are the few the fake host's shell understands.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore, Machine, MachineHost, MachineSpec, ResolvedImage } from "../../src/index.js";
import { MachinePortError, writeRootfsLayout } from "../../src/index.js";
import { execOutput } from "../helpers/guest.js";
import { layerFilesConformance } from "./layer-files-conformance.js";

export interface HostUnderTest {
  host: MachineHost;
  /** The host's layers directory: where its disks and layers lie (named across the interface by their names there). */
  dir: string;
  /** The blob store the host's layers port stores into (its `localDir` is `dir`, a cache of a remote store). */
  blobs: BlobStore;
  /** The run root the host was given: each machine's sockets lie in a folder named after it there. */
  runRoot: string;
  /** An image the host holds (machines boot from its base). */
  image: string;
  /** The spec of a machine booting (or resuming) from the disk named `rootDisk`. */
  spec(name: string, rootDisk: string): MachineSpec;
  /** Whether this host can adopt a machine this process still holds (a VM's agent takes one client). */
  adoptsLive: boolean;
  /** A shell line that echoes every TCP connection to `port` back to it until the other side ends (in this guest image). */
  echoServer(port: number): string;
  /** A network interface for a new machine (removed by close), or null where this host cannot give one. */
  nic: ((name: string) => Promise<NonNullable<MachineSpec["nic"]>>) | null;
  close(): Promise<void>;
}

const DISK = 2 * 1024 ** 3;
/** Under sandtree/: never pulled, so a host answers at once that it does not have it. */
const UNKNOWN_IMAGE = "sandtree/conformance-no-such-image";

async function run(m: Machine, shell: string): Promise<{ out: string; err: string; code: number }> {
  const { out, err, code } = await execOutput(m.exec({ shell, timeoutMs: 60_000 }));
  return { out, err, code };
}

async function* chunks(text: string): AsyncIterable<Uint8Array> {
  yield Buffer.from(text);
}

async function readAll(m: Machine, file: string): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of m.readFile(file)) parts.push(c);
  return Buffer.concat(parts).toString();
}

/** Runs a listener; `ended` is set (with its output) once it exits. */
function listen(m: Machine, shell: string, timeoutMs: number) {
  const x = m.exec({ shell, timeoutMs });
  const state = { ended: null as string | null, x };
  let output = "";
  void (async () => {
    for await (const ev of x.events) {
      if (ev.type === "stdout" || ev.type === "stderr") output += ev.data.toString();
      else if (ev.type === "exit") state.ended = `exit ${ev.info.exit_code}: ${output}`;
    }
    state.ended ??= `ended: ${output}`;
  })().catch((err: Error) => {
    state.ended = err.message;
  });
  return state;
}

/** A connection to `port` once the listener listens there (one just started may not yet). */
async function connectWhenListening(m: Machine, port: number, listener: { ended: string | null }): Promise<Duplex> {
  for (let i = 1; ; i++) {
    try {
      return await m.connect(port);
    } catch (err) {
      if (!(err instanceof MachinePortError && err.refused) || i >= 150) throw err;
      if (listener.ended !== null) throw new Error(`the listener ended: ${listener.ended}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Sends `data`, half-closes, and resolves with all that comes back until the other side's end. */
function roundTrip(sock: Duplex, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const got: Buffer[] = [];
    sock.on("data", (c: Buffer) => got.push(c));
    sock.once("end", () => resolve(Buffer.concat(got)));
    sock.once("error", reject);
    sock.end(data);
  });
}

export function machineHostConformance(name: string, make: () => Promise<HostUnderTest>, timeoutMs = 30_000): void {
  describe(`MachineHost conformance: ${name}`, () => {
    let t: HostUnderTest;
    let a: Machine;
    let image: ResolvedImage;
    let base: string;
    const started: Machine[] = [];
    const disk = (n: string) => `${n}.qcow2`;
    const start = async (n: string, rootDisk: string, extra: Partial<MachineSpec> = {}) => {
      const m = await t.host.start({ ...t.spec(n, rootDisk), ...extra });
      started.push(m);
      return m;
    };

    beforeAll(async () => {
      t = await make();
      image = await t.host.images.resolve(t.image, {});
      base = await t.host.linkBase(image.base);
      await t.host.createDisk(base, disk("a"), DISK);
      a = await start("conf-a", disk("a"));
    }, 4 * timeoutMs);

    afterAll(async () => {
      for (const m of started) await m.stop({ graceMs: 0 }).catch(() => {});
      await t?.close();
    }, 2 * timeoutMs);

    it("says what it can do", () => {
      expect(typeof t.host.capabilities.accel).toBe("string");
      expect(typeof t.host.capabilities.memorySnapshots).toBe("boolean");
      expect(typeof t.host.capabilities.nested.ok).toBe("boolean");
    });

    it("says whether its machines may mount volumes; where not, why, and a machine with mounts is refused unstarted", async () => {
      const volumes = t.host.capabilities.volumes;
      if (volumes.ok) {
        expect(volumes).toEqual({ ok: true });
        return;
      }
      expect(volumes.why).toMatch(/\w/);
      const spec = {
        ...t.spec("conf-vol", disk("conf-vol")),
        mounts: [{ volume: "conf-vol", guestPath: "/mnt/vol" }],
      };
      await expect(t.host.start(spec)).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
      expect((await t.host.survivors()).map((s) => s.name)).not.toContain("conf-vol");
    });

    it("refuses a mount whose volume is named by a path (not a name in its volumes directory), with VALIDATION_FAILED, before it starts or adopts", {
      timeout: timeoutMs,
    }, async () => {
      const outside = path.join(t.dir, "..", `conf-vol-escape-${path.basename(t.dir)}`);
      const bad = ["", "..", "../conf-vol", "conf-vol/data", ".conf-vol", "/etc", outside, "x".repeat(65)];
      for (const volume of bad) {
        const mounts = [{ volume, guestPath: "/mnt/vol" }];
        await expect(t.host.start({ ...t.spec("conf-vol-bad", disk("conf-vol-bad")), mounts }), volume).rejects.toMatchObject({
          code: "VALIDATION_FAILED",
          message: expect.stringMatching(/volume's name/),
        });
        await expect(
          t.host.adopt({ name: "conf-a", pid: a.pid, deadlineMs: 1000, keepPaused: false, mounts }),
          volume,
        ).rejects.toMatchObject({
          code: "VALIDATION_FAILED",
        });
      }
      // The field the API names in its details, the same through a remote host.
      await expect(
        t.host.start({ ...t.spec("conf-vol-bad", disk("conf-vol-bad")), mounts: [{ volume: "..", guestPath: "/mnt/vol" }] }),
      ).rejects.toMatchObject({ details: { field: "mounts.volume" } });
      expect(existsSync(outside), outside).toBe(false);
      expect((await t.host.survivors()).map((s) => s.name)).not.toContain("conf-vol-bad");
      expect((await run(a, "echo up")).out).toBe("up\n");
    });

    it("reads the end of a running machine's console log; no log there reads empty", { timeout: timeoutMs }, async () => {
      const tail = await t.host.consoleTail("conf-a", 1024 * 1024);
      expect(tail.text.length, "the machine wrote nothing to its console").toBeGreaterThan(0);
      expect(tail.size).toBeGreaterThanOrEqual(Buffer.byteLength(tail.text));
      expect(await t.host.consoleTail("conf-never-started", 100)).toEqual({ text: "", size: 0 });
    });

    it("refuses a machine name that could leave its directories, with VALIDATION_FAILED", { timeout: timeoutMs }, async () => {
      const bad = ["", "..", "../conf-a", "conf/a", ".conf", "conf..a", "conf a", "x".repeat(65)];
      for (const name of bad) {
        await expect(t.host.start({ ...t.spec("conf-x", disk("a")), name }), name).rejects.toMatchObject({
          code: "VALIDATION_FAILED",
          message: expect.stringMatching(/machine's name/),
        });
        await expect(t.host.consoleTail(name, 100), name).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(t.host.discard(name), name).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(t.host.adopt({ name, pid: a.pid, deadlineMs: 1000, keepPaused: false }), name).rejects.toMatchObject({
          code: "VALIDATION_FAILED",
        });
      }
      await expect(t.host.discard("../conf-a")).rejects.toMatchObject({ details: { field: "name" } });
      // The longest name is taken (its files are under the host's roots like any other).
      expect(await t.host.consoleTail("x".repeat(64), 100)).toEqual({ text: "", size: 0 });
      expect((await run(a, "echo up")).out).toBe("up\n");
    });

    it("refuses a disk, layer or memory state named by a path (not a name in its layers directory), with VALIDATION_FAILED", {
      timeout: timeoutMs,
    }, async () => {
      const outside = path.join(t.dir, "..", `conf-escape-${path.basename(t.dir)}`);
      const bad = ["", "..", "../a.qcow2", "sub/a.qcow2", path.join(t.dir, disk("a")), outside];
      const refused = { code: "VALIDATION_FAILED" };
      for (const name of bad) {
        await expect(t.host.start(t.spec("conf-bad", name)), name).rejects.toMatchObject(refused);
        await expect(t.host.start({ ...t.spec("conf-bad", disk("a")), memoryState: name }), name).rejects.toMatchObject(refused);
        await expect(t.host.createDisk(base, name, DISK), name).rejects.toMatchObject(refused);
        await expect(t.host.createDisk(name, disk("conf-bad"), DISK), name).rejects.toMatchObject(refused);
        await expect(t.host.flattenLayer(name, base, "conf-bad-flat"), name).rejects.toMatchObject(refused);
        await expect(t.host.flattenLayer(base, base, name), name).rejects.toMatchObject(refused);
        const ck = { nextDisk: disk("conf-bad-next"), diskSizeBytes: DISK, freezeDeadlineMs: 10_000 };
        await expect(a.checkpoint({ ...ck, nextDisk: name }), name).rejects.toMatchObject(refused);
        await expect(a.checkpoint({ ...ck, memoryFile: name }), name).rejects.toMatchObject(refused);
      }
      // Nothing was made, inside the layers directory or outside it, and the machine runs on its disk.
      for (const made of [outside, path.join(t.dir, disk("conf-bad")), path.join(t.dir, disk("conf-bad-next"))])
        expect(existsSync(made), made).toBe(false);
      expect(a.activeDisk).toBe(disk("a"));
      expect((await run(a, "echo up")).out).toBe("up\n");
      expect((await t.host.survivors()).map((s) => s.name)).not.toContain("conf-bad");
    });

    layerFilesConformance(() => ({ t, image, base }), timeoutMs);

    it("resolves an image to a base on the host, the one its first machine started on", { timeout: timeoutMs }, async () => {
      expect(image.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(["local", "registry"]).toContain(image.source);
      expect(image.virtualSizeBytes).toBeGreaterThan(0);
      expect(typeof image.labels).toBe("object");
      expect(await t.host.images.resolve(t.image, {})).toEqual(image);
      await t.host.images.check(t.image, {});
      expect(await t.host.linkBase(image.base)).toBe(base);
      expect((await run(a, "echo up")).out).toBe("up\n");
    });

    it("answers IMAGE_NOT_FOUND for an image it has not and cannot pull", { timeout: timeoutMs }, async () => {
      await expect(t.host.images.check(UNKNOWN_IMAGE, {})).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
      await expect(t.host.images.resolve(UNKNOWN_IMAGE, {})).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    });

    it("lists the images it holds, the resolved one among them", { timeout: timeoutMs }, async () => {
      const listed = await t.host.images.list();
      expect(listed).toContainEqual(expect.objectContaining({ ref: image.ref, digest: image.digest, source: image.source }));
    });

    it("imports an OCI layout of the caller's machine under a name", { timeout: timeoutMs }, async () => {
      const rootfs = path.join(t.dir, "import-rootfs");
      mkdirSync(path.join(rootfs, "etc"), { recursive: true });
      writeFileSync(path.join(rootfs, "etc", "conformance"), "imported\n");
      const layout = path.join(t.dir, "import-layout");
      const manifest = await writeRootfsLayout(rootfs, layout, { refName: "v1" });
      const imported = await t.host.images.importLayout(layout, "sandtree/conformance-import", { layoutRef: "v1" });
      expect(imported).toMatchObject({ digest: manifest.digest, source: "local" });
      expect(await t.host.images.resolve("sandtree/conformance-import", {})).toMatchObject({ digest: manifest.digest });
      expect((await t.host.images.list()).map((i) => i.ref)).toContain(imported.ref);
      await expect(
        t.host.images.importLayout(path.join(t.dir, "no-layout"), "sandtree/conformance-none", {}),
      ).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
      await expect(t.host.images.importLayout(layout, "sandtree/conformance-none", { layoutRef: "v2" })).rejects.toMatchObject({
        code: "IMAGE_NOT_FOUND",
      });
    });

    it("runs commands: output, exit codes, errors", { timeout: timeoutMs }, async () => {
      expect(await run(a, "echo hello")).toMatchObject({ out: "hello\n", code: 0 });
      expect((await run(a, "exit 3")).code).toBe(3);
      const missing = await run(a, "cat /root/conf-none");
      expect(missing.code).not.toBe(0);
      expect(missing.err).toMatch(/No such file/);
    });

    it("takes stdin: a command reads what it is sent until stdin closes", { timeout: timeoutMs }, async () => {
      const x = a.exec({ shell: "cat", stdin: true, timeoutMs: 60_000 });
      await x.writeStdin(Buffer.from("one\n"));
      await x.writeStdin(Buffer.from("two\n"));
      x.closeStdin();
      let out = "";
      let code = -1;
      for await (const ev of x.events) {
        if (ev.type === "stdout") out += ev.data.toString();
        else if (ev.type === "exit") code = ev.info.exit_code;
      }
      expect({ out, code }).toEqual({ out: "one\ntwo\n", code: 0 });
    });

    it("reads, writes, lists and removes files", { timeout: timeoutMs }, async () => {
      await a.mkdir("/root/conf/sub", { parents: true });
      await a.writeFile("/root/conf/sub/f.txt", chunks("one"));
      await a.writeFile("/root/conf/sub/f.txt", chunks("+two"), { append: true });
      expect(await readAll(a, "/root/conf/sub/f.txt")).toBe("one+two");
      expect(await a.stat("/root/conf/sub/f.txt")).toMatchObject({ type: "file", size: 7 });
      expect((await a.list("/root/conf/sub")).map((e) => e.name)).toEqual(["f.txt"]);
      expect((await run(a, "cat /root/conf/sub/f.txt")).out).toBe("one+two");
      await a.remove("/root/conf", { recursive: true });
      await expect(a.stat("/root/conf")).rejects.toMatchObject({ errnoCode: "ENOENT" });
    });

    it("pauses and resumes: a command sent while paused runs after the resume", { timeout: timeoutMs }, async () => {
      await a.pause();
      expect(await a.runState({ timeoutMs: 5000 })).toBe("paused");
      const late = run(a, "echo after");
      await a.resume();
      expect(await a.runState({ timeoutMs: 5000 })).toBe("running");
      expect((await late).out).toBe("after\n");
    });

    let layer: string;
    it("checkpoints files: the layer holds the disk as it was; the machine writes on", { timeout: timeoutMs }, async () => {
      await run(a, "echo before > /root/ck.txt");
      const saved = await a.checkpoint({ nextDisk: disk("a-1"), diskSizeBytes: DISK, freezeDeadlineMs: 10_000 });
      expect(saved.memoryState).toBeNull();
      expect(saved.layer).toBe(disk("a"));
      expect(a.activeDisk).toBe(disk("a-1"));
      layer = saved.layer;
      await run(a, "echo after > /root/ck.txt");
      expect((await run(a, "cat /root/ck.txt")).out).toBe("after\n");
      const sealed = await t.host.layers(t.blobs).store(path.basename(layer));
      expect(sealed.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(sealed.size).toBeGreaterThan(0);
      expect(await t.blobs.stat(path.basename(layer))).toEqual({ size: sealed.size });
    });

    it("stores a layer file in the blob store and fetches it back where it went missing", { timeout: timeoutMs }, async () => {
      const layers = t.host.layers(t.blobs);
      const bytes = randomBytes(64 * 1024);
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      writeFileSync(path.join(t.dir, "conf-state"), bytes);
      expect(await layers.store("conf-state")).toEqual({ sha256, size: bytes.length });
      expect(await t.blobs.stat("conf-state")).toEqual({ size: bytes.length });
      rmSync(path.join(t.dir, "conf-state"));
      await layers.fetch("conf-state", sha256);
      expect(readFileSync(path.join(t.dir, "conf-state")).equals(bytes)).toBe(true);
      // Fetched again where it lies: checked, not downloaded twice (and still there).
      await layers.fetch("conf-state", sha256);
      expect(existsSync(path.join(t.dir, "conf-state"))).toBe(true);
    });

    it("refuses a layer whose bytes are not the recorded ones, one the store lacks, and a key that is a path", {
      timeout: timeoutMs,
    }, async () => {
      const layers = t.host.layers(t.blobs);
      writeFileSync(path.join(t.dir, "conf-wrong"), "these bytes");
      await layers.store("conf-wrong");
      await expect(layers.fetch("conf-wrong", "0".repeat(64))).rejects.toMatchObject({ code: "CHECKPOINT_CORRUPT" });
      await expect(layers.fetch("conf-never-stored", "0".repeat(64))).rejects.toMatchObject({ code: "CHECKPOINT_CORRUPT" });
      await expect(layers.fetch("conf-wrong", "0".repeat(64))).rejects.toMatchObject({ details: { key: "conf-wrong" } });
      for (const key of ["../conf-wrong", "/etc/passwd", "sub/conf-wrong", ""]) {
        await expect(layers.store(key), key).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
        await expect(layers.fetch(key, "0".repeat(64)), key).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
      }
    });

    it("starts a fork from the checkpoint's layer: it sees the files as they were", { timeout: 2 * timeoutMs }, async () => {
      await t.host.createDisk(path.basename(layer), disk("fork"), DISK);
      const fork = await start("conf-fork", disk("fork"));
      expect((await run(fork, "cat /root/ck.txt")).out).toBe("before\n");
      await run(fork, "echo fork > /root/ck.txt");
      expect((await run(a, "cat /root/ck.txt")).out).toBe("after\n");
      const exit = await fork.stop({ graceMs: 0 });
      expect(exit.expected).toBe(true);
      expect(fork.exit).not.toBeNull();
    });

    it("flattens a layer into one over the base: the same files", { timeout: 2 * timeoutMs }, async () => {
      const flat = await t.host.flattenLayer(path.basename(layer), base, "flat.qcow2");
      expect(flat.sha256).toMatch(/^[0-9a-f]{64}$/);
      await t.host.createDisk("flat.qcow2", disk("on-flat"), DISK);
      const m = await start("conf-flat", disk("on-flat"));
      expect((await run(m, "cat /root/ck.txt")).out).toBe("before\n");
      await m.stop({ graceMs: 0 });
    });

    it("checkpoints memory where it can, and a machine resumes from it", { timeout: 4 * timeoutMs }, async () => {
      // A host without memory snapshots says so (capabilities); nothing more to check (no skip: CI counts skips as failures).
      if (!t.host.capabilities.memorySnapshots) return;
      await run(a, "echo mem > /root/mem.txt");
      const memoryFile = "mem-conf";
      const saved = await a.checkpoint({ nextDisk: disk("a-2"), diskSizeBytes: DISK, freezeDeadlineMs: 10_000, memoryFile });
      expect(saved.memoryState).toBe(memoryFile);
      expect(existsSync(path.join(t.dir, memoryFile))).toBe(true);
      expect((await run(a, "echo still")).out).toBe("still\n");
      await t.host.createDisk(path.basename(saved.layer), disk("resumed"), DISK);
      const m = await start("conf-resumed", disk("resumed"), { memoryState: memoryFile });
      expect((await run(m, "cat /root/mem.txt")).out).toBe("mem\n");
      await m.stop({ graceMs: 0 });
    });

    it("lists its running machines for adoption, and adopts one", { timeout: 2 * timeoutMs }, async () => {
      const found = await t.host.survivors();
      expect(found.map((s) => s.name)).toContain("conf-a");
      // QEMU's agent takes one client, so a live machine is adopted only once its first host is
      // gone: restart.test.ts adopts through a real restart (no skip: CI counts skips as failures).
      if (!t.adoptsLive) return;
      const adopted = await t.host.adopt({
        name: "conf-a",
        pid: a.pid,
        deadlineMs: 10_000,
        keepPaused: false,
      });
      expect(adopted.adoptedRunState).toBe("running");
      expect((await run(adopted, "cat /root/ck.txt")).out).toBe("after\n");
    });

    it("connects to a guest port: bytes both ways; a port nobody listens on is refused", { timeout: 3 * timeoutMs }, async () => {
      // `a` has no network interface: a connection is refused before anything is tried.
      await expect(a.connect(7000)).rejects.toMatchObject({ code: "NETWORK_DISABLED" });
      // A host that cannot give a machine a network here has nothing more to show (no skip: CI counts skips as failures).
      if (!t.nic) return;
      await t.host.createDisk(base, disk("net"), DISK);
      const m = await start("conf-net", disk("net"), { nic: await t.nic("conf-net") });
      const listener = listen(m, t.echoServer(7000), 4 * timeoutMs);
      const sent = Buffer.from(Array.from({ length: 256 * 1024 }, (_, i) => (i * 7) % 251));
      const echoed = await roundTrip(await connectWhenListening(m, 7000, listener), sent);
      expect(echoed.equals(sent)).toBe(true);
      const refused = await m.connect(7001).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(MachinePortError);
      expect(refused).toMatchObject({ port: 7001, refused: true });
      listener.x.signal(9);
      await m.stop({ graceMs: 0 });
    });

    it("stops: the exit is expected, and the machine takes no more commands", { timeout: timeoutMs }, async () => {
      const exit = await a.stop({ graceMs: 0 });
      expect(exit.expected).toBe(true);
      expect(a.controllable).toBe(false);
      await expect(run(a, "echo no")).rejects.toThrow();
    });

    it("keeps a stopped machine's console log: a short tail is its end", { timeout: timeoutMs }, async () => {
      const whole = await t.host.consoleTail("conf-a", 1024 * 1024);
      expect(whole.text.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(whole.text)).toBe(Math.min(whole.size, 1024 * 1024));
      const end = await t.host.consoleTail("conf-a", 10);
      expect(end.size).toBe(whole.size);
      expect(end.text).toBe(Buffer.from(whole.text).subarray(-10).toString());
    });

    it("discards what a killed machine left in its run directory, once or twice; its log stays", {
      timeout: 2 * timeoutMs,
    }, async () => {
      await t.host.createDisk(base, disk("kill"), DISK);
      const m = await start("conf-kill", disk("kill"));
      const exited = new Promise((r) => m.once("exit", r));
      m.forceKill();
      await exited;
      expect(existsSync(path.join(t.runRoot, "conf-kill")), "a killed machine leaves its sockets").toBe(true);
      await t.host.discard("conf-kill");
      expect(existsSync(path.join(t.runRoot, "conf-kill"))).toBe(false);
      await t.host.discard("conf-kill");
      await t.host.discard("conf-never-started");
      expect((await t.host.consoleTail("conf-kill", 1024)).size).toBeGreaterThan(0);
      expect((await t.host.survivors()).map((s) => s.name)).not.toContain("conf-kill");
    });
  });
}
