// Volumes as the machine layer serves them (MachineSpec.mounts): one host directory shared
// read-write by real sandboxes over NFSv3 from the host's NFS-Ganesha, reached through the
// sandbox network's nftables rules. Three small VMs of sandtree/debian in all: A and B boot, C is
// a memory fork of A (then reset from the same checkpoint). Skipped where the host cannot serve
// volumes (not root, no ganesha, no /dev/net/tun) or setup did not build the guest.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  detectAccel,
  ImageStore,
  type Machine,
  NetworkManager,
  networkUnavailableReason,
  type SandboxSlot,
  VolumeFileServer,
  volumeServerUnavailableReason,
} from "../src/index.js";
import { createOverlay, type QemuMachine, QemuMachineHost } from "../src/qemu.js";
import { artifactsMissing, execOutput, smallGuestSpec } from "./helpers/guest.js";

const unavailable = volumeServerUnavailableReason() ?? (await networkUnavailableReason()) ?? artifactsMissing();

const dir = mkdtempSync("/tmp/stvol-");
const volumesDir = path.join(dir, "volumes");
/** The volume `share`'s directory in the host's volumes directory. */
const share = path.join(volumesDir, "share", "data");
const tag = `v${Math.random().toString(36).slice(2, 7)}`;
const subnet = `10.249.${Math.floor(Math.random() * 250)}.0/24`;
const MOUNT = "/mnt/share";
const DISK = 2 * 1024 ** 3;

/** Runs a shell command in the guest; resolves with stdout, rejects with stderr on failure. */
async function sh(m: Machine, script: string, timeoutMs = 120_000): Promise<string> {
  const r = await execOutput(m.exec({ argv: ["/bin/sh", "-c", script], user: "root", env: {}, timeoutMs }));
  const { out, err } = r;
  const code = r.timedOut ? -2 : r.code;
  if (code !== 0) throw new Error(`guest command failed (${code}): ${script}\n${err}${out}`);
  return out;
}

/** Writes `text` to a file in the share with write + fsync + close. */
const writeSynced = (m: Machine, name: string, text: string) =>
  sh(
    m,
    `python3 -c 'import os,sys; f=open(sys.argv[1],"w"); f.write(sys.argv[2]); f.flush(); os.fsync(f.fileno()); f.close()' ${MOUNT}/${name} '${text}'`,
  );

describe.skipIf(unavailable)("volumes mounted in machines (NFSv3 from the host)", () => {
  let volumes: VolumeFileServer;
  let net: NetworkManager;
  let host: QemuMachineHost;
  let base: string;
  const machines: Machine[] = [];
  let accel: "kvm" | "tcg";

  const spec = (name: string, index: number, rootDisk: string, extra: object = {}) => {
    const slot: SandboxSlot = net.slot(index);
    return smallGuestSpec({
      name,
      accel,
      rootDisk,
      nic: { tap: net.tapName(index), guestNet: `${slot.address}/${slot.prefix} ${slot.gateway}` },
      mounts: [{ volume: "share", guestPath: MOUNT }],
      ...extra,
    });
  };

  async function attach(index: number): Promise<void> {
    const slot = net.slot(index);
    const tap = net.tapName(index);
    await net.createTap(tap, slot);
    await net.addRules({
      sandboxId: `sb${index}`,
      slot,
      tap,
      policy: { mode: "deny_all", allow: [], deny: [] },
      tunnels: [],
      generation: 1,
      resolved: [],
    });
  }

  async function boot(name: string, index: number): Promise<Machine> {
    await attach(index);
    const disk = path.join(dir, `${name}.qcow2`);
    await createOverlay(base, disk, DISK);
    const m = await host.start(spec(name, index, path.basename(disk)));
    machines.push(m);
    return m;
  }

  beforeAll(async () => {
    mkdirSync(share, { recursive: true });
    accel = await detectAccel("auto");
    base = (await new ImageStore().resolve("sandtree/debian")).basePath;
    volumes = await VolumeFileServer.open({ dir: path.join(dir, "nfs") });
    net = new NetworkManager({ tag, subnet, resolverPort: 53, volumePorts: [volumes.ports.nfs, volumes.ports.mount] });
    await net.init([]);
    host = new QemuMachineHost({
      volumes,
      runRoot: path.join(dir, "r"),
      logRoot: path.join(dir, "logs"),
      layersDir: dir,
      volumesDir,
    });
  }, 120_000);

  afterAll(async () => {
    for (const m of machines) await m.stop({ graceMs: 0 }).catch(() => {});
    await volumes?.close();
    for (let i = 0; i < 3; i++) await net?.deleteTap(net.tapName(i));
    await net?.destroy();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("says its machines may mount volumes with a file server; one whose networks are not open says why, and refuses mounts", async () => {
    expect(host.capabilities.volumes).toEqual({ ok: true });
    const closed = new QemuMachineHost({
      runRoot: path.join(dir, "r2"),
      logRoot: path.join(dir, "logs2"),
      layersDir: dir,
      volumesDir,
    });
    expect(closed.capabilities.volumes).toEqual({ ok: false, why: expect.stringMatching(/no network/) });
    await expect(closed.start(spec("closed", 8, "never.qcow2"))).rejects.toMatchObject({
      code: "NOT_SUPPORTED",
    });
  });

  it("refuses mounts on a machine without a network before starting anything", async () => {
    const s = spec("nonet", 9, "never.qcow2");
    const { nic: _nic, ...noNic } = s;
    await expect(host.start(noNic)).rejects.toMatchObject({ code: "NETWORK_DISABLED" });
    // A sandbox created with its network off has a NIC whose link stays down ("-").
    const linkDown = { ...s, nic: { tap: s.nic.tap, guestNet: "-" } };
    await expect(host.start(linkDown)).rejects.toMatchObject({ code: "NETWORK_DISABLED" });
  });

  let a: Machine;
  let b: Machine;
  it("two sandboxes mount one directory read-write and see each other's fsynced files", async () => {
    [a, b] = await Promise.all([boot("a", 0), boot("b", 1)]);
    expect(await sh(a, `grep ' ${MOUNT} ' /proc/mounts`)).toMatch(/ nfs rw,nosuid,nodev,.*vers=3/);
    await writeSynced(a, "from-a", "hello from a");
    expect(await sh(b, `cat ${MOUNT}/from-a`)).toBe("hello from a");
    await writeSynced(b, "from-b", "hello from b");
    expect(await sh(a, `cat ${MOUNT}/from-b`)).toBe("hello from b");
    expect(readFileSync(path.join(share, "from-b"), "utf8")).toBe("hello from b");
    // The config opens the export to the two guests' addresses only.
    const conf = readFileSync(path.join(dir, "nfs", "ganesha.conf"), "utf8");
    const clients = /Clients = ([^;]*);/.exec(conf)?.[1]?.split(", ").sort();
    expect(clients).toEqual([net.slot(0).address, net.slot(1).address].sort());
  }, 400_000);

  it("holds a workload's renames, hard links, fsyncs and the owners of guest users", async () => {
    const py = String.raw`
import os
d = "${MOUNT}/work"; os.makedirs(d, exist_ok=True)
for i in range(50):
    with open(f"{d}/t{i}", "w") as f: f.write("x" * i); f.flush(); os.fsync(f.fileno())
    os.rename(f"{d}/t{i}", f"{d}/f{i}")
os.link(f"{d}/f7", f"{d}/hard7")
assert os.stat(f"{d}/hard7").st_nlink == 2
os.chown(f"{d}/f1", 1000, 1000); os.chmod(f"{d}/f1", 0o640)
os.symlink("f2", f"{d}/link2"); assert open(f"{d}/link2").read() == "xx"
os.unlink(f"{d}/f3"); assert not os.path.exists(f"{d}/f3")
dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
print(len(os.listdir(d)))
`;
    expect((await sh(a, `python3 -c '${py}'`)).trim()).toBe("51");
    const st = statSync(path.join(share, "work", "f1"));
    expect([st.uid, st.gid, st.mode & 0o777]).toEqual([1000, 1000, 0o640]);
    expect(statSync(path.join(share, "work", "hard7")).ino).toBe(statSync(path.join(share, "work", "f7")).ino);
    // A user of the guest writes as itself: the owner on the host is its uid.
    await sh(
      b,
      `mkdir -p ${MOUNT}/nobody && chown 65534 ${MOUNT}/nobody && su -s /bin/sh nobody -c 'echo hi > ${MOUNT}/nobody/x'`,
    );
    expect(statSync(path.join(share, "nobody", "x")).uid).toBe(65534);
    // A file larger than the guest's RAM (256 MiB).
    await sh(b, `dd if=/dev/zero of=${MOUNT}/big bs=1M count=300 conv=fsync status=none`, 300_000);
    expect(statSync(path.join(share, "big")).size).toBe(300 << 20);
    await sh(b, `rm ${MOUNT}/big`);
  }, 400_000);

  it("keeps working across pause/resume", async () => {
    await a.pause({ timeoutMs: 10_000 });
    writeFileSync(path.join(share, "while-paused"), "host wrote this");
    await a.resume({ timeoutMs: 10_000 });
    a.syncClock();
    expect(await sh(a, `cat ${MOUNT}/while-paused`)).toBe("host wrote this");
  }, 120_000);

  let memFile: string;
  let frozen: string;
  /** Machine "c" (index 2) resumed from A's memory fork, on a new overlay `file` of the frozen layer. */
  async function startFork(file: string): Promise<Machine> {
    const disk = path.join(dir, file);
    await createOverlay(frozen, disk, DISK);
    const c = await host.start(spec("c", 2, path.basename(disk), { memoryState: path.basename(memFile) }));
    machines.push(c);
    return c;
  }
  it("a memory fork of a sandbox with the mount reads and writes the share", async () => {
    const next = path.join(dir, "a-next.qcow2");
    await createOverlay(path.basename(a.activeDisk as string), next, DISK, { unsafe: true });
    memFile = path.join(dir, "mem-a");
    await a.pause({ timeoutMs: 10_000 });
    try {
      frozen = await (a as QemuMachine).snapshotDisk(next, { timeoutMs: 10_000 });
      await (a as QemuMachine).saveMemory(memFile, { signal: AbortSignal.timeout(120_000) });
    } finally {
      await a.resume({ timeoutMs: 10_000 });
    }
    await writeSynced(a, "after-checkpoint", "a after the checkpoint");
    await attach(2);
    const c = await startFork("c.qcow2");
    // The child resumed with its parent's mount (the helper found it mounted) on its own address.
    expect(await sh(c, `cat ${MOUNT}/after-checkpoint`, 180_000)).toBe("a after the checkpoint");
    await writeSynced(c, "from-c", "hello from the fork");
    expect(await sh(a, `cat ${MOUNT}/from-c`)).toBe("hello from the fork");
    expect(readFileSync(path.join(share, "from-c"), "utf8")).toBe("hello from the fork");
  }, 400_000);

  it("a reset (the fork again from the same checkpoint) mounts the live share", async () => {
    const old = machines.pop() as Machine;
    await old.stop({ graceMs: 0 });
    const c = await startFork("c2.qcow2");
    expect(await sh(c, `cat ${MOUNT}/from-c`, 180_000)).toBe("hello from the fork");
    await writeSynced(c, "after-reset", "written after the reset");
    expect(readFileSync(path.join(share, "after-reset"), "utf8")).toBe("written after the reset");
  }, 400_000);

  it("restarts a file server that died, and the guests' mounts carry on (same ports and handles)", async () => {
    const before = volumes.pid as number;
    process.kill(before, "SIGKILL");
    const deadline = Date.now() + 60_000;
    while (volumes.pid === undefined || volumes.pid === before) {
      if (Date.now() > deadline) throw new Error("the file server was not restarted");
      await new Promise((r) => setTimeout(r, 100));
    }
    await writeSynced(a, "after-server-restart", "written after the server died");
    expect(await sh(b, `cat ${MOUNT}/after-server-restart`)).toBe("written after the server died");
  }, 180_000);

  it("keeps what a guest fsynced when its QEMU is killed with SIGKILL, and closes the export to it", async () => {
    await writeSynced(b, "before-kill", "fsynced before kill -9");
    const exited = new Promise<void>((r) => b.once("exit", () => r()));
    process.kill(b.pid, "SIGKILL");
    await exited;
    expect(readFileSync(path.join(share, "before-kill"), "utf8")).toBe("fsynced before kill -9");
    const deadline = Date.now() + 30_000;
    while (readFileSync(path.join(dir, "nfs", "ganesha.conf"), "utf8").includes(`${net.slot(1).address};`)) {
      if (Date.now() > deadline) throw new Error("the export still lists the killed machine's address");
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);
});
