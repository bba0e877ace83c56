import type {
  AdoptSpec,
  BlobStore,
  ConsoleTail,
  HostCapabilities,
  HostImages,
  HostLayers,
  HostNetworks,
  HostVolumes,
  Machine,
  MachineHost,
  MachineSpec,
  VolumeMount,
  WarmCacheOptions,
  WarmCaches,
} from "@sandtree/host";

const PREFIX = "sandtree-";

/**
 * The machine host with each sandbox's volumes added to its machine: every start (cold, warm
 * clone, memory restore, fork, reset) and every adoption after a restart of a sandbox that
 * mounts volumes gets them, read from the store by the sandbox's id (its machine's name, see
 * machineNameOf). A memory state already holds the guest's NFS mounts: its machine must get the
 * same exports again, or the guest's mounts hang.
 */
export class MountingHost implements MachineHost {
  constructor(
    private readonly host: MachineHost,
    private readonly mountsOf: (sandboxId: string) => Promise<VolumeMount[]>,
  ) {}

  get capabilities(): HostCapabilities {
    return this.host.capabilities;
  }

  get images(): HostImages {
    return this.host.images;
  }

  get networks(): HostNetworks {
    return this.host.networks;
  }

  get volumes(): HostVolumes {
    return this.host.volumes;
  }

  warmCaches(opts: WarmCacheOptions): WarmCaches | null {
    return this.host.warmCaches(opts);
  }

  linkBase(basePath: string): Promise<string> {
    return this.host.linkBase(basePath);
  }

  createDisk(backing: string, disk: string, sizeBytes: number, opts?: { signal?: AbortSignal }): Promise<void> {
    return this.host.createDisk(backing, disk, sizeBytes, opts);
  }

  layers(blobs: BlobStore): HostLayers {
    return this.host.layers(blobs);
  }

  readonly flattenLayer: MachineHost["flattenLayer"] = (...args) => this.host.flattenLayer(...args);
  readonly hasLayer: MachineHost["hasLayer"] = (...args) => this.host.hasLayer(...args);
  readonly removeLayer: MachineHost["removeLayer"] = (...args) => this.host.removeLayer(...args);
  readonly listLayers: MachineHost["listLayers"] = (...args) => this.host.listLayers(...args);

  private async mounts(name: string): Promise<VolumeMount[]> {
    return name.startsWith(PREFIX) ? this.mountsOf(name.slice(PREFIX.length)) : [];
  }

  async start(spec: MachineSpec): Promise<Machine> {
    const mounts = await this.mounts(spec.name);
    return this.host.start(mounts.length > 0 ? { ...spec, mounts } : spec);
  }

  async adopt(spec: AdoptSpec): Promise<Machine> {
    const mounts = await this.mounts(spec.name);
    return this.host.adopt(mounts.length > 0 ? { ...spec, mounts } : spec);
  }

  survivors(): Promise<Array<{ name: string; pid: number }>> {
    return this.host.survivors();
  }

  killSurvivor(pid: number, name: string): void {
    this.host.killSurvivor(pid, name);
  }

  consoleTail(name: string, bytes: number, opts?: { signal?: AbortSignal }): Promise<ConsoleTail> {
    return this.host.consoleTail(name, bytes, opts);
  }

  discard(name: string, opts?: { signal?: AbortSignal }): Promise<void> {
    return this.host.discard(name, opts);
  }
}
