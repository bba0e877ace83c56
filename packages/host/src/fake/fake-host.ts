import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import type { ConsoleTail } from "../machine/console-tail.js";
import type { AdoptSpec, HostCapabilities, HostImages, MachineHost, MachineSpec, WarmCaches } from "../machine/machine.js";
import { MachineRefusedError } from "../machine/machine.js";
import { checkMachineName, MachineDirs } from "../machine/machine-dirs.js";
import { LocalVolumes } from "../volumes/local-volumes.js";
import { checkMounts } from "../volumes/volume-dirs.js";
import { FakeDisks } from "./fake-disks.js";
import { FakeImages, type FakeImagesOptions, fakeBaseFile, withFakeBases } from "./fake-images.js";
import { FakeMachine } from "./fake-machine.js";
import { FakeNetworks } from "./fake-networks.js";

/** The fake host's folder, made when first needed. */
function hostDir(opts: { dir?: string }): string {
  return (opts.dir ??= mkdtempSync(path.join(tmpdir(), "sandtree-fake-host-")));
}

/**
 * A host that runs no VM: each machine is a file map with a tiny shell (fake-shell.ts), its disks
 * small JSON files (fake-disks.ts), a checkpoint the file map written into the layer. For tests of
 * everything above the seam (services, the API) in milliseconds, and as the smallest
 * implementation of the interface the conformance suite checks. Machines outlive a server that
 * closes without stopping them, as VMs do: a second server given the same host adopts them.
 */
export class FakeHost extends FakeDisks implements MachineHost {
  readonly capabilities: HostCapabilities = {
    accel: "fake",
    memorySnapshots: true,
    nested: { ok: false, why: "the fake host runs no VM" },
    // Its machines' files are a map in memory: a host directory shared with them would be a pretence.
    volumes: { ok: false, why: "the fake host runs no VM and serves no files to its machines" },
  };
  /** Sandbox networks in memory (addresses from a pool; no tap, rule or resolver). */
  readonly networks = new FakeNetworks();
  /**
   * Volumes in its volumes directory (unbounded): made, filled and measured like any host's,
   * though its machines cannot mount them.
   */
  readonly volumes = new LocalVolumes(() => (this.opts.volumesDir ??= path.join(hostDir(this.opts), "volumes")));
  /** Live machines by name. */
  readonly machines = new Map<string, FakeMachine>();
  /** Starts so far (tests count them). */
  starts = 0;
  readonly images: HostImages;
  private machineDirs: MachineDirs | undefined;

  /**
   * `images`: FakeImages' options, or images of the test's own (ones that never pull, say). `dir`:
   * where its machines' run and log folders go (default: a new folder under the system's temp dir,
   * made when first needed); `layersDir`: its layers directory (default: `layers` in `dir`);
   * `volumesDir`: its volumes directory (default: `volumes` in `dir`).
   */
  constructor(
    private readonly opts: {
      images?: FakeImagesOptions | HostImages;
      dir?: string;
      layersDir?: string;
      volumesDir?: string;
    } = {},
  ) {
    super(() => (opts.layersDir ??= path.join(hostDir(opts), "layers")));
    const images = opts.images && "resolve" in opts.images ? opts.images : new FakeImages(opts.images);
    this.images = withFakeBases(images, () => this.imagesDir);
  }

  /** Where its images' fake bases lie: `images` in its folder. */
  private get imagesDir(): string {
    return path.join(this.dir, "images");
  }

  protected baseFile(base: string): string {
    return fakeBaseFile(this.imagesDir, base);
  }

  private get dir(): string {
    return hostDir(this.opts);
  }

  private get dirs(): MachineDirs {
    this.machineDirs ??= new MachineDirs(path.join(this.dir, "run"), path.join(this.dir, "logs"));
    return this.machineDirs;
  }

  warmCaches(): WarmCaches | null {
    return null;
  }

  async start(spec: MachineSpec): Promise<FakeMachine> {
    spec.signal?.throwIfAborted();
    checkMachineName(spec.name);
    const rootDisk = this.file(spec.rootDisk, "rootDisk");
    const memoryState = spec.memoryState === undefined ? undefined : this.file(spec.memoryState, "memoryState");
    refuseMounts(spec.mounts);
    if (this.machines.get(spec.name)?.exit === null) throw new MachineRefusedError(`${spec.name} is already running`);
    const m = new FakeMachine(spec.name, this.dirs.runDir(spec.name), {
      disks: this,
      rootDisk,
      logDir: this.dirs.logDir(spec.name),
      memoryState: memoryState ?? spec.template?.stateFile,
      guestNet: spec.nic?.guestNet,
    });
    this.starts++;
    this.machines.set(spec.name, m);
    m.once("exit", () => {
      if (this.machines.get(spec.name) === m) this.machines.delete(spec.name);
    });
    return m;
  }

  async adopt(spec: AdoptSpec): Promise<FakeMachine> {
    checkMachineName(spec.name);
    refuseMounts(spec.mounts);
    const m = this.machines.get(spec.name);
    if (!m || m.exit || m.pid !== spec.pid) throw new MachineRefusedError(`${spec.name} (pid ${spec.pid}) is not running`);
    m.adoptedRunState = (await m.runState()) ?? "gone";
    if (spec.keepPaused) await m.pause();
    else if (m.adoptedRunState === "paused") await m.resume();
    return m;
  }

  async survivors(): Promise<Array<{ name: string; pid: number }>> {
    return [...this.machines.values()].filter((m) => !m.exit).map((m) => ({ name: m.name, pid: m.pid }));
  }

  killSurvivor(pid: number, name: string): void {
    const m = this.machines.get(name);
    if (m && m.pid === pid) m.forceKill();
  }

  /** Its machines write their console log as a VM's does (fake-machine.ts): read the same way. */
  consoleTail(name: string, bytes: number): Promise<ConsoleTail> {
    return this.dirs.consoleTail(name, bytes);
  }

  discard(name: string): Promise<void> {
    return this.dirs.discard(name);
  }
}

/** What capabilities.volumes says, as the QEMU host without a file server answers it (a bad name first). */
function refuseMounts(mounts: MachineSpec["mounts"]): void {
  checkMounts(mounts);
  if (mounts?.length) throw new SandtreeError("NOT_SUPPORTED", "this host does not serve volumes: the fake host runs no VM");
}
