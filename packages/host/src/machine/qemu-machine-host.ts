import { SandtreeError } from "@sandtree/protocol";
import { ImageStore, type ImageStoreOptions } from "../images/image-store.js";
import { StoreImages } from "../images/store-images.js";
import type { MachineLimiter } from "../limits/machine-limiter.js";
import { DEFAULT_MACHINE_RATES } from "../limits/machine-limits.js";
import type { HostNetworks } from "../network/host-networks.js";
import { type NetworkVolumes, SandboxNetworks } from "../network/sandbox-networks.js";
import { defaultJailConfig, type JailConfig } from "../vmm/jail.js";
import type { Accel } from "../vmm/qemu-args.js";
import { findQemuProcesses, QemuVm, qemuAlive } from "../vmm/qemu-vm.js";
import type { VolumeFileServer } from "../volumes/file-server.js";
import { type GuestMount, guestAddressOf, type VolumeMount } from "../volumes/guest-mount.js";
import { LocalVolumes } from "../volumes/local-volumes.js";
import { mountInGuest } from "../volumes/mount-in-guest.js";
import { checkMounts, volumeDataDir } from "../volumes/volume-dirs.js";
import type { VolumeImages } from "../volumes/volume-image.js";
import type { ConsoleTail } from "./console-tail.js";
import {
  type AdoptSpec,
  bootAndFiles,
  type HostCapabilities,
  type HostImages,
  type MachineHost,
  type MachineSpec,
} from "./machine.js";
import { checkMachineName, MachineDirs } from "./machine-dirs.js";
import { nestedSupport } from "./nested.js";
import { QemuDisks } from "./qemu-disks.js";
import { QemuMachine } from "./qemu-machine.js";
import { qemuWarmCaches, type WarmCacheOptions, type WarmCaches } from "./qemu-warm.js";

export interface QemuMachineHostOptions {
  /**
   * Where machines' sockets and pid files go, each in a directory named after its machine (and
   * the warm caches' VMs'); keep it short: Unix socket paths are limited to 108 bytes. A
   * restarted host finds its machines by it (survivors).
   */
  runRoot: string;
  /** Where machines' logs go (console.log, qemu.log), each in a directory named after its machine; kept after it ended. */
  logRoot: string;
  /**
   * Its layers directory: machines' disks, checkpoint layers, memory states and image templates'
   * disks, each named across the interface by its name there (HostDisks). The blob store its
   * layers port is given keeps its local files here.
   */
  layersDir: string;
  /**
   * Its volumes directory: each volume's files under its name (`<name>/data`, volumeDataDir), what
   * MachineSpec.mounts name, made, filled and served through its volumes port (LocalVolumes).
   */
  volumesDir: string;
  /** How its volumes are bounded (each its own image); default: by the host's disk only. */
  volumeImages?: VolumeImages;
  /** The accelerator machines run under (detectAccel); default `tcg`. */
  accel?: Accel;
  /**
   * A file server the caller opened (low-level tests) for MachineSpec.mounts; default: the one its
   * networks open with themselves where this machine can run it (SandboxNetworks.volumes). Without
   * either a spec with mounts is refused (NOT_SUPPORTED; capabilities.volumes says why).
   */
  volumes?: VolumeFileServer | undefined;
  /** How long the guest may take to mount one volume. */
  mountTimeoutMs?: number;
  /** Each QMP command's deadline (pause, resume, a checkpoint's disk snapshot); default 15 s. */
  controlDeadlineMs?: number;
  /** Each machine in its own cgroup and its tap rate-limited; without it machines run unlimited. */
  limiter?: MachineLimiter | undefined;
  /**
   * The jail every QEMU of this host runs in (docs/security.md); default defaultJailConfig() (on
   * when this process is root). Two hosts of one process may differ.
   */
  jail?: JailConfig;
  /**
   * How a machine's writable disk file is opened. `host` (the default): buffered in the host's
   * page cache. `direct`: O_DIRECT (its read-only backing chain stays in the page cache, shared),
   * so every write is the QEMU's own and cgroup v1's blkio throttle sees it (buffered writeback
   * runs in the kernel's flusher threads, outside any limit). Measured (bench/isolation.mjs, two
   * runs): `direct` did not lower a neighbour's exec p99 under an I/O flood (1.90x and 3.36x of
   * quiet, against 0.81x and 1.68x buffered), so it is not the default.
   */
  diskCache?: DiskCache;
  /** Where this host keeps its images and which registries it pulls from (default: ImageStore's defaults). */
  images?: ImageStoreOptions;
  /** Its sandbox networks (opened by the control plane); default: this machine's own, unopened, warning to `log`. */
  networks?: SandboxNetworks;
  /**
   * Where the default networks' warnings go (a tunnel not restored, a denylist update that
   * failed); default: one JSON line each on stderr, never dropped. The server passes its logger
   * with its own networks instead (default-host.ts).
   */
  log?: { warn(o: object, m: string): void };
}

/** A host made without a logger still says what went wrong beside it. */
const stderrWarnings = {
  warn: (o: object, m: string) => process.stderr.write(`${JSON.stringify({ level: "warn", ...o, msg: m })}\n`),
};

export type DiskCache = "direct" | "host";

/** This host's QEMU microVMs. */
export class QemuMachineHost extends QemuDisks implements MachineHost {
  private readonly fixed: Omit<HostCapabilities, "volumes">;
  private readonly ownNetworks: SandboxNetworks;
  /** How this host's QEMUs are jailed. */
  readonly jail: JailConfig;
  /** Images as bases built on this host (its image store). */
  readonly images: HostImages;
  private readonly store: ImageStore;
  private readonly directDisk: boolean;
  private readonly dirs: MachineDirs;
  /** Its volumes' storage and files, in its volumes directory. */
  readonly volumes: LocalVolumes;

  constructor(private readonly opts: QemuMachineHostOptions) {
    super(opts.layersDir);
    this.dirs = new MachineDirs(opts.runRoot, opts.logRoot);
    this.jail = opts.jail ?? defaultJailConfig();
    this.volumes = new LocalVolumes(() => opts.volumesDir, opts.volumeImages);
    this.ownNetworks = opts.networks ?? new SandboxNetworks({ log: opts.log ?? stderrWarnings });
    this.directDisk = opts.diskCache === "direct";
    this.store = new ImageStore(opts.images);
    this.images = new StoreImages(this.store);
    const accel = opts.accel ?? "tcg";
    const nested = nestedSupport(accel);
    this.fixed = {
      accel,
      memorySnapshots: true,
      nested: nested.ok ? { ok: true } : { ok: false, why: nested.why },
    };
  }

  protected baseFile(base: string): string {
    return this.store.baseFile(base);
  }

  get networks(): HostNetworks {
    return this.ownNetworks;
  }

  /** Volumes come with its networks: once they are open, where this machine runs a file server. */
  get capabilities(): HostCapabilities {
    const v = this.fileServer();
    return { ...this.fixed, volumes: v.server ? { ok: true } : { ok: false, why: v.why } };
  }

  private fileServer(): NetworkVolumes {
    return this.opts.volumes ? { server: this.opts.volumes } : this.ownNetworks.volumes;
  }

  /** The booted templates and memory images that make starts warm (see WarmCaches). */
  warmCaches(opts: WarmCacheOptions): WarmCaches {
    return qemuWarmCaches(opts, { jail: this.jail, runRoot: this.dirs.runRoot, layersDir: this.layersDir });
  }

  private wrap(
    vm: QemuVm,
    spec: { accel?: string; nested?: boolean | undefined } | null,
    guestNet: string | undefined,
    paused = false,
  ): QemuMachine {
    return new QemuMachine(vm, {
      paused,
      guestNet,
      ...(this.opts.controlDeadlineMs !== undefined ? { controlDeadlineMs: this.opts.controlDeadlineMs } : {}),
      identity: spec?.accel ? `${spec.accel}${spec.nested ? "+nested" : ""}` : null,
      layersDir: this.layersDir,
    });
  }

  /**
   * Exports the mounts to the machine's address (before it runs: a resumed guest's mounts
   * reconnect at once); the file server that holds the grant, or null without mounts.
   */
  private async grantMounts(
    name: string,
    mounts: VolumeMount[] | undefined,
    guestNet: string | undefined,
  ): Promise<{ server: VolumeFileServer; guest: GuestMount[] } | null> {
    if (!mounts?.length) return null;
    const resolved = mounts.map((m) => ({ ...m, dir: volumeDataDir(this.opts.volumesDir, m.volume) }));
    const v = this.fileServer();
    if (!v.server) throw new SandtreeError("NOT_SUPPORTED", `this host does not serve volumes: ${v.why}`);
    if (!guestNet || guestNet === "-") {
      const why = guestNet ? "the sandbox was created with its network off" : "the server runs with networks off";
      throw new SandtreeError("NETWORK_DISABLED", `volumes are mounted over the sandbox's network, and it has none (${why})`);
    }
    return { server: v.server, guest: await v.server.grant(name, guestAddressOf(guestNet), resolved) };
  }

  private revokeOnExit(machine: QemuMachine, name: string, server: VolumeFileServer): void {
    const revoke = () => void server.revoke(name).catch(() => {});
    if (machine.exit) revoke();
    else machine.once("exit", revoke);
  }

  async start(spec: MachineSpec): Promise<QemuMachine> {
    checkMachineName(spec.name);
    this.file(spec.rootDisk, "rootDisk");
    if (spec.memoryState !== undefined) this.file(spec.memoryState, "memoryState");
    checkMounts(spec.mounts);
    const granted = await this.grantMounts(spec.name, spec.mounts, spec.nic?.guestNet);
    let machine: QemuMachine;
    try {
      machine = await this.boot(spec);
    } catch (err) {
      if (granted) await granted.server.revoke(spec.name).catch(() => {});
      throw err;
    }
    if (!granted) return machine;
    this.revokeOnExit(machine, spec.name, granted.server);
    try {
      await mountInGuest(machine, granted.guest, { timeoutMs: this.opts.mountTimeoutMs ?? 60_000 });
    } catch (err) {
      await machine.stop({ graceMs: 0 }).catch(() => {});
      throw err;
    }
    return machine;
  }

  /** The machine's cgroup goes once it exited (adopted ones keep theirs while they run). */
  private releaseOnExit(machine: QemuMachine): void {
    const limiter = this.opts.limiter;
    if (!limiter) return;
    const release = () => void limiter.release(machine.name).catch(() => {});
    if (machine.exit) release();
    else machine.once("exit", release);
  }

  private async boot(spec: MachineSpec): Promise<QemuMachine> {
    const limiter = this.opts.limiter;
    const rates = spec.rates ?? DEFAULT_MACHINE_RATES;
    // The tap's rate goes on while QEMU starts (its `tc` and `ip` processes beside the jail's
    // grants and QEMU's launch), and is in place before the machine is handed out: no program of
    // the sandbox runs before start() returns.
    const rated = limiter && spec.nic ? limiter.limitTap(spec.nic.tap, rates, spec.signal) : Promise.resolve();
    rated.catch(() => {});
    const place = limiter ? { onSpawn: (pid: number) => limiter.place(spec.name, pid, spec, rates) } : {};
    const vm = await QemuVm.start({
      ...place,
      ...bootAndFiles(spec),
      rootDisk: this.file(spec.rootDisk, "rootDisk"),
      runDir: this.dirs.runDir(spec.name),
      logDir: this.dirs.logDir(spec.name),
      ...(spec.nic ? { tap: spec.nic.tap, guestNet: spec.nic.guestNet } : {}),
      ...(spec.nested ? { nested: true } : {}),
      ...(spec.signal ? { signal: spec.signal } : {}),
      ...(this.directDisk ? { directDisk: true } : {}),
      jail: this.jail,
      ...(spec.template
        ? {
            memoryFile: { path: spec.template.ramFile, share: false },
            restoreFrom: spec.template.stateFile,
            ...(spec.template.rootWait ? { rootWait: true } : {}),
          }
        : {}),
      ...(spec.memoryState ? { restoreFrom: this.file(spec.memoryState, "memoryState") } : {}),
    }).catch((err: unknown) => {
      if (limiter) void limiter.release(spec.name).catch(() => {});
      throw err;
    });
    try {
      await rated;
    } catch (err) {
      await vm.stop({ graceMs: 0 }).catch(() => {});
      throw err;
    }
    const machine = this.wrap(vm, spec, spec.nic?.guestNet);
    this.releaseOnExit(machine);
    return machine;
  }

  async adopt(spec: AdoptSpec): Promise<QemuMachine> {
    checkMachineName(spec.name);
    checkMounts(spec.mounts);
    const granted = await this.grantMounts(spec.name, spec.mounts, spec.guestNet);
    const vm = await QemuVm.adopt({
      name: spec.name,
      pid: spec.pid,
      runDir: this.dirs.runDir(spec.name),
      logDir: this.dirs.logDir(spec.name),
      connectTimeoutMs: spec.deadlineMs,
      keepPaused: spec.keepPaused,
      ...(spec.signal ? { signal: spec.signal } : {}),
      ...(spec.guestNet ? { guestNet: spec.guestNet } : {}),
      ...(this.directDisk ? { directDisk: true } : {}),
      jail: this.jail,
    }).catch(async (err: unknown) => {
      await granted?.server.revoke(spec.name).catch(() => {});
      throw err;
    });
    // A paused sandbox's VM was stopped again after the handshake.
    const machine = this.wrap(vm, null, spec.guestNet, spec.keepPaused);
    if (granted) this.revokeOnExit(machine, spec.name, granted.server);
    this.releaseOnExit(machine);
    return machine;
  }

  /** Every QEMU that names a path under the run root: this host's machines (and its warm caches' VMs). */
  async survivors(): Promise<Array<{ name: string; pid: number }>> {
    return findQemuProcesses(this.dirs.runRoot);
  }

  killSurvivor(pid: number, name: string): void {
    try {
      if (qemuAlive(pid, name)) process.kill(pid, "SIGKILL");
    } catch {}
    void this.opts.limiter?.release(name).catch(() => {});
  }

  consoleTail(name: string, bytes: number): Promise<ConsoleTail> {
    return this.dirs.consoleTail(name, bytes);
  }

  discard(name: string): Promise<void> {
    return this.dirs.discard(name);
  }
}
