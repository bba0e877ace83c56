import type { MachineHost } from "@sandtree/host";
import type { Sandbox } from "@sandtree/protocol";
import type { NetworkService } from "../network/network-service.js";
import { Provisioner } from "./provisioner.js";
import { Reconciler } from "./reconciler.js";
import { SandboxMachines } from "./sandbox-machines.js";
import { SandboxPaths } from "./sandbox-paths.js";
import type { SandboxServiceDeps } from "./sandbox-service.js";
import { WarmStarts } from "./warm-starts.js";

/** What the parts ask of the sandbox service they serve. */
export interface SandboxPartsOwner {
  environmentOf(sb: Sandbox): Promise<Record<string, string>>;
  /** A create of this sandbox is still being provisioned. */
  provisioning(id: string): boolean;
  closing(): boolean;
  /** The sandboxes whose machines run on hosts other than the one named (see Placement.elsewhere). */
  elsewhere(hostName: string): Promise<Set<string>>;
}

/** A host sandboxes are placed on: its name in the fleet's registry, the host, and its networks. */
export interface BundleHost {
  name: string;
  host: MachineHost;
  /** The host's sandbox networks (absent: no sandbox there gets a NIC). */
  network?: NetworkService;
  /** The images its machines run on (default: the service's, this process's own host's). */
  images?: BundleDeps["images"];
  /**
   * The host outlives or dies apart from this process (a worker's): it may stop its machines by
   * itself as it shuts down, which ends their sandboxes TERMINATED naming it (SandboxMachines).
   */
  livesApart?: boolean;
}

/**
 * What runs sandboxes on one host, wired in dependency order: where their files go, the warm
 * caches, the machines it supervises, the provisioner that starts them, the reconciler that
 * adopts them after a restart. One per placed host (HostBundles).
 */
export interface HostBundle extends Readonly<BundleHost> {
  /** The images its machines run on (its host's). */
  readonly images: BundleDeps["images"];
  readonly paths: SandboxPaths;
  readonly warm: WarmStarts;
  readonly machines: SandboxMachines;
  readonly provisioner: Provisioner;
  readonly reconciler: Reconciler;
}

/** What every bundle of a sandbox service shares: the control plane's store, images, guest, log and settings. */
export type BundleDeps = Pick<
  SandboxServiceDeps,
  "store" | "images" | "dataDir" | "accel" | "guest" | "log" | "warmTemplates" | "deadlines"
>;

/** Builds the bundle of a host for the sandbox service `owner` (see HostBundles). */
export function hostBundle(deps: BundleDeps, owner: SandboxPartsOwner, at: BundleHost): HostBundle {
  const { host, network } = at;
  const images = at.images ?? deps.images;
  const net = network ? { network } : {};
  const paths = new SandboxPaths(deps.dataDir);
  const warm = new WarmStarts(
    {
      host,
      dataDir: deps.dataDir,
      guest: deps.guest,
      accel: deps.accel,
      log: deps.log,
      ...net,
    },
    deps.warmTemplates !== false,
  );
  const machines = new SandboxMachines({
    store: deps.store,
    host,
    paths,
    log: deps.log,
    agentDeadlineMs: deps.deadlines?.agentMs ?? 30_000,
    ...(at.livesApart ? { stopsByItself: at.name } : {}),
    ...net,
  });
  const provisioner = new Provisioner({
    store: deps.store,
    images,
    paths,
    machines,
    host,
    accel: deps.accel,
    guest: deps.guest,
    log: deps.log,
    templates: warm.templates,
    memoryImages: warm.memoryImages,
    environmentOf: (sb) => owner.environmentOf(sb),
    ...net,
  });
  const reconciler = new Reconciler({
    store: deps.store,
    host,
    machines,
    paths,
    log: deps.log,
    adoptDeadlineMs: deps.deadlines?.adoptMs ?? 10_000,
    provisioning: (id) => owner.provisioning(id),
    placedElsewhere: () => owner.elsewhere(at.name),
    closing: () => owner.closing(),
    ...net,
  });
  return { ...at, images, paths, warm, machines, provisioner, reconciler };
}
