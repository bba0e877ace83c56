import { rmSync } from "node:fs";
import type { Accel, GuestArtifacts, Machine, MachineHost, VolumeMount } from "@sandtree/host";
import { type CreateSandboxParams, type Sandbox, type SandboxStatus, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { SandboxFilter } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { LOCAL_HOST } from "../fleet/host-names.js";
import type { RestorePlan } from "../fleet/restore-plan.js";
import { type ImageAliases, imageOfCreate } from "../images/image-aliases.js";
import type { ImageResolver } from "../images/image-resolver.js";
import type { NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import { MountingHost } from "../volumes/mounting-host.js";
import type { VolumeService } from "../volumes/volume-service.js";
import type { AdmissionService } from "./admission-service.js";
import type { CheckpointCreate, CreateAnswer, ImageCreate } from "./create-kinds.js";
import { hereSite } from "./here-site.js";
import { HostBundles, type PeersReach } from "./host-bundles.js";
import { pauseHere, resumeHere } from "./machine-control.js";
import { pendingSandbox } from "./pending-sandbox.js";
import type { RestoreLayers } from "./provisioner.js";
import type { ReconcileOptions, ReconcileResult } from "./reconciler.js";
import { ACTIVE } from "./sandbox-machines.js";
import { type BundleHost, type HostBundle, hostBundle, type SandboxPartsOwner } from "./sandbox-parts.js";
import { newSandboxId } from "./sandbox-paths.js";
import { listPage, sandboxLogs } from "./sandbox-reads.js";
import { type ResetTarget, resetInPlace } from "./sandbox-reset.js";
import type { Placement, PlacementFactory, SandboxSite, SandboxStart } from "./sandbox-site.js";

export { liveDiskName, memoryMbFor } from "./sandbox-paths.js";
export type { SandboxStart } from "./sandbox-site.js";

export interface SandboxServiceDeps {
  store: Store;
  images: ImageResolver;
  aliases?: ImageAliases;
  dataDir: string;
  accel: Accel;
  guest: GuestArtifacts;
  log: Logger;
  admission: AdmissionService;
  /** The local host's sandbox networks (absent: no sandbox there gets a NIC). */
  network?: NetworkService;
  /** This process's own host, the local bundle's (see startServer). */
  host: MachineHost;
  /** Its name in the fleet's registry (default `local`; `local-<id>` on a shared store). */
  hostName?: string;
  /** Checks a create's `volumes` (refuses them until they can be mounted). */
  volumes?: Pick<VolumeService, "resolveMounts" | "attach">;
  /** A sandbox's volume mounts, added to its machine on every host (MountingHost; absent: none). */
  mountsOf?: (sandboxId: string) => Promise<VolumeMount[]>;
  /** Warm starts from booted templates (default on). */
  warmTemplates?: boolean;
  /** Deadlines of calls into VMs (ms); see the config module. Absent: the defaults. */
  deadlines?: { adoptMs?: number; agentMs?: number };
  /**
   * Where sandboxes run, built around this host's site (see sandbox-site.ts): the fleet's
   * placement (server-runtime.ts), which keeps every create here until a worker joins.
   */
  placement: PlacementFactory;
  /** How a peer control plane's sandbox on a worker is reached for access (fleet mode on a shared store). */
  peers?: PeersReach;
}

/**
 * Sandbox lifecycle as a state machine in the store: PENDING -> PROVISIONING -> RUNNING ->
 * TERMINATED, or ERROR/TIMEOUT. Every transition is conditional on the current status, so a
 * delete racing a create wins and the provisioner cleans up what it started. Machines are reached
 * only through the host's Machine interface, by the bundle of the host a sandbox is placed on
 * (host-bundles.ts: its provisioner, machines and reconciler).
 */
export class SandboxService {
  private readonly provisioning = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private closing = false;
  /** What runs sandboxes on each host, and the host each sandbox is on. */
  readonly bundles: HostBundles;
  private readonly placement: Placement;
  private readonly teardownHooks: Array<(id: string, machine: Machine | undefined) => unknown> = [];
  private readonly startHooks: Array<(start: SandboxStart) => void> = [];
  private readonly owner: SandboxPartsOwner;
  /** The site of each host's bundle, by the host's name. */
  private readonly sites = new Map<string, SandboxSite>();
  constructor(private readonly deps: SandboxServiceDeps) {
    this.owner = {
      environmentOf: (sb: Sandbox) => this.environmentOf(sb),
      provisioning: (id: string) => this.provisioning.has(id),
      closing: () => this.closing,
      // This host's: those placed on workers; a worker's: none (its reconciliation is given its placements).
      elsewhere: (name) => (name === this.bundles.local.name ? this.placement.elsewhere() : Promise.resolve(new Set<string>())),
    };
    const { host, network } = deps;
    const local = { name: deps.hostName ?? LOCAL_HOST, host, ...(network ? { network } : {}) };
    this.bundles = new HostBundles(hostBundle(deps, this.owner, this.mounting(local)), deps.peers);
    const here = this.siteOf(this.bundles.local);
    this.placement = deps.placement(here, { on: (name) => this.sites.get(name) });
    // A sandbox that ends here (delete, timeout) ends at its site too.
    this.teardownHooks.push((id) => this.placement.teardown(id));
  }

  /** A bundle's site: its provisioner starts what is placed there, pause and resume go to its machines. */
  private siteOf(bundle: HostBundle): SandboxSite {
    const site = hereSite(bundle, {
      startHooks: this.startHooks,
      placed: (id) => this.bundles.place(id, bundle),
      control: async (teamId, id, action) => {
        const c = { store: this.deps.store, bundles: this.bundles };
        if (action === "pause") await pauseHere(c, id, await this.running(teamId, id));
        else await resumeHere(c, await this.get(teamId, id));
      },
    });
    this.sites.set(bundle.name, site);
    return site;
  }

  /**
   * A host sandboxes may now be placed on (a worker's remote host, its networks, its images): its
   * bundle, over this service's store and settings, with the sandboxes already placed there
   * (`placed`: its reconciliation adopts them); placement finds its site by the host's name.
   */
  addHost(at: BundleHost, placed: Iterable<string> = []): HostBundle {
    const bundle = hostBundle(this.deps, this.owner, this.mounting(at));
    this.bundles.add(bundle);
    for (const id of placed) this.bundles.place(id, bundle);
    this.siteOf(bundle);
    return bundle;
  }

  /** The host with each sandbox's volumes added to its machines (every host alike: they mount what their own volumes port holds). */
  private mounting(at: BundleHost): BundleHost {
    const { mountsOf } = this.deps;
    return mountsOf ? { ...at, host: new MountingHost(at.host, mountsOf) } : at;
  }

  /** A host gone (lost, or registered again): its bundle and site go; answered for the caller to close its host. */
  dropHost(name: string): HostBundle | undefined {
    const b = this.bundles.drop(name);
    if (b) this.sites.delete(name);
    return b;
  }

  /** Prunes every host's warm caches (see WarmStarts.prune). Run at start, before requests are taken. */
  pruneTemplates(): void {
    for (const b of this.bundles.all()) b.warm.prune(b.provisioner);
  }

  /** Starts building the memory image of a state just saved from `sb` on its host (see Provisioner). */
  prepareMemoryImage(sb: Sandbox, memState: string): void {
    this.bundles.of(sb.id).provisioner.prepareMemoryImage(sb, memState);
  }

  /** The image base under a sandbox's disk chain. */
  baseOf(sb: Sandbox): Promise<string> {
    return this.bundles.of(sb.id).provisioner.baseOf(sb);
  }

  /** Creates a sandbox from an image, or answers the one an unexpired idempotency key created (`created: false`). */
  createFromImage(teamId: string, params: ImageCreate): Promise<CreateAnswer> {
    return this.createOrReplay(teamId, params, null);
  }

  /** As createFromImage, from a checkpoint: its plan, made by the checkpoint's verification (RestoreService). */
  createFromCheckpoint(teamId: string, c: CheckpointCreate): Promise<CreateAnswer> {
    return this.createOrReplay(teamId, c.params, c.plan);
  }

  private async createOrReplay(
    teamId: string,
    params: CreateSandboxParams,
    given: RestoreLayers | RestorePlan | null,
  ): Promise<CreateAnswer> {
    if (this.closing) throw new SandtreeError("UNAVAILABLE", "the server is shutting down");
    const replayed = await this.deps.admission.replay(teamId, params);
    if (replayed) return { sandbox: replayed, created: false };
    const credentials = params.registry_credentials;
    const { image, alias } = await imageOfCreate(this.deps.aliases, params);
    // A restore's image comes from its checkpoint, which was verified.
    if (!params.checkpoint_id) await this.deps.images.check(image, credentials ? { credentials } : {});
    this.bundles.local.network?.validate(params);
    const mounts = (await this.deps.volumes?.resolveMounts(teamId, params.volumes, params.network)) ?? [];
    const sandbox = pendingSandbox(newSandboxId(), teamId, image, params, this.deps.accel);
    // Placed (fleet), then quotas, rate limits and idempotency in the insert's transaction.
    const admit = () => this.deps.admission.admit(sandbox, params);
    const { site, admitted, restore } = await this.placement.placeAndAdmit(sandbox, params, admit, given);
    if (!admitted.created) return admitted;
    await this.deps.volumes?.attach(sandbox.id, mounts);
    const starts = await site.admitted(sandbox, params);
    sandbox.secrets = admitted.sandbox.secrets ?? {};
    if (params.checkpoint_id) {
      const lineage = { source_checkpoint_id: params.checkpoint_id, head_checkpoint_id: params.checkpoint_id };
      await this.deps.store.updateSandbox(sandbox.id, lineage);
      Object.assign(sandbox, lineage);
    }
    await this.deps.store.addEvent(sandbox.id, `created from ${params.image}${alias ? ` (an image alias for ${image})` : ""}`);
    const abort = new AbortController();
    const plan = restore && params.restore_memory ? restore : restore ? { ...restore, memState: null } : null;
    const done = starts.start(credentials, plan, abort.signal).finally(() => {
      this.provisioning.delete(sandbox.id);
    });
    this.provisioning.set(sandbox.id, { abort, done });
    const start: SandboxStart = { sandbox, params, restored: plan ? (plan.memState ? "memory" : "disk") : "none", ready: done };
    starts.starting(start);
    return { sandbox, created: true };
  }

  /**
   * Called (synchronously, in registration order) for every sandbox a create, restore or fork
   * starts on this host's site (not on a fleet worker) and every reset; `ready` settles once it is RUNNING or failed. Services
   * that set something up in the guest (a desktop's display) hook in here, not in the routes.
   */
  onStart(hook: (start: SandboxStart) => void): void {
    this.startHooks.push(hook);
  }

  /** What every exec and the start command get: environment_vars, then the decrypted secrets. */
  async environmentOf(sb: Sandbox): Promise<Record<string, string>> {
    return { ...sb.environment_vars, ...(await this.deps.admission.secretsOf(sb.id)) };
  }

  /**
   * Episode reset in place: the sandbox's machine is replaced by one resumed from a memory
   * checkpoint (its disk on the checkpoint's layer), keeping the sandbox's id (see sandbox-reset.ts).
   */
  async reset(teamId: string, id: string, r: ResetTarget): Promise<Sandbox> {
    const sb = await this.get(teamId, id);
    const old = await this.running(teamId, id);
    const { machines, provisioner } = this.bundles.of(id);
    await resetInPlace({ machines, provisioner, store: this.deps.store, log: this.deps.log }, sb, old, r, (start) => {
      for (const hook of this.startHooks) hook(start);
    });
    return await this.get(teamId, id);
  }

  /** Why the host holds this sandbox's machine on a disk error (host disk full), or undefined. */
  ioErrorOf(id: string): string | undefined {
    return this.bundles.of(id).machines.ioErrorOf(id);
  }

  /** Marks a RUNNING sandbox ERROR with the reason and kills its machine (the exit handler cleans up). */
  failVm(id: string, machine: Machine, reason: string, from: readonly SandboxStatus[] = ["RUNNING"]): Promise<void> {
    return this.bundles.of(id).machines.failVm(id, machine, reason, from);
  }

  /** Spilled output of buffered execs (deleted with the sandbox). */
  outputDir(id: string): string {
    return this.bundles.of(id).paths.outputDir(id);
  }

  async get(teamId: string, id: string): Promise<Sandbox> {
    const sb = await this.deps.store.getSandbox(id, teamId);
    if (!sb) throw new SandtreeError("SANDBOX_NOT_FOUND", `sandbox ${id} not found`, { id });
    return sb;
  }

  /** One page of a team's sandboxes (filters as the store takes them), newest first. */
  list(teamId: string, q: Omit<SandboxFilter, "beforeSeq"> & { cursor?: string }) {
    return listPage(this.deps.store, teamId, q);
  }

  /** The running machine of a sandbox, or 404 / 409 SANDBOX_NOT_RUNNING / 507 HOST_DISK_FULL. */
  async running(teamId: string, id: string): Promise<Machine> {
    const sb = await this.get(teamId, id);
    if (this.bundles.adoption(id)) {
      // The routes wait for the adoption first (whenAdopted); this is for callers that do not.
      throw new SandtreeError(
        "SANDBOX_NOT_RUNNING",
        `sandbox ${id} is being reconnected after a server restart; retry in a moment`,
        { id, status: sb.status, adopting: true },
      );
    }
    const machine = this.bundles.machine(id) ?? (sb.status === "RUNNING" ? await this.bundles.reachPeer(id) : undefined);
    if (sb.status !== "RUNNING" || !machine || machine.exit) {
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} is ${sb.status}, not RUNNING`, { id, status: sb.status });
    }
    const ioError = machine.diskError;
    if (ioError) {
      throw new SandtreeError("HOST_DISK_FULL", `sandbox ${id} is held: ${ioError}; it runs on once space is freed`, { id });
    }
    return machine;
  }

  /** Stops the VM's CPUs where it runs (memory and disk stay, quotas do not count it); answers the record. */
  async pause(teamId: string, id: string): Promise<Sandbox> {
    await (await this.placement.siteOf(teamId, id)).control(teamId, id, "pause");
    return await this.get(teamId, id);
  }

  /** Continues a PAUSED sandbox with every process as it was, where it runs; answers the record. */
  async resume(teamId: string, id: string): Promise<Sandbox> {
    await (await this.placement.siteOf(teamId, id)).control(teamId, id, "resume");
    return await this.get(teamId, id);
  }

  async delete(teamId: string, id: string): Promise<Sandbox> {
    // A machine still being adopted is waited for (its deadline bounds it). A paused guest cannot
    // shut down cleanly: let it run for its shutdown (one that does not answer is killed by the stop).
    await this.bundles.adoption(id)?.done;
    // A peer's sandbox on a worker: its machine is reached while it is placed, to be stopped here.
    if (!this.bundles.machine(id)) await this.bundles.reachPeer(id);
    if ((await this.deps.store.getSandbox(id, teamId))?.status === "PAUSED")
      await this.bundles
        .machine(id)
        ?.resume()
        .catch(() => {});
    const sb = await this.get(teamId, id);
    if (!TERMINAL_STATUSES.includes(sb.status)) {
      await this.deps.store.updateSandbox(id, { status: "TERMINATED", terminated_at: new Date().toISOString() }, ACTIVE);
      await this.deps.store.addEvent(id, "deleted");
    }
    await this.teardown(id);
    return await this.get(teamId, id);
  }

  /** Called at each teardown, in order (errors ignored), with the VM while it runs (stopped after them). */
  onTeardown(hook: (id: string, machine: Machine | undefined) => unknown): void {
    this.teardownHooks.push(hook);
  }

  /** Stops whatever runs for a sandbox and removes its disk and sockets. Idempotent. */
  private async teardown(id: string): Promise<void> {
    const b = this.bundles.of(id);
    const live = this.bundles.machine(id);
    for (const hook of this.teardownHooks) {
      try {
        await hook(id, live && !live.exit ? live : undefined);
      } catch {}
    }
    // An adoption in flight settles within its deadline (close() cancels it first).
    await b.reconciler.adopting.get(id)?.done;
    const p = this.provisioning.get(id);
    if (p) {
      p.abort.abort(new Error("sandbox deleted"));
      await p.done;
    }
    const machine = b.machines.take(id) ?? this.bundles.unreach(id);
    if (machine) await machine.stop();
    b.provisioner.forget(id);
    await b.machines.cleanupDisk(id);
    await b.machines.discard(id);
    rmSync(b.paths.outputDir(id), { recursive: true, force: true });
    await b.network?.detach(id);
    this.bundles.release(id);
  }

  /** Moves an active sandbox to TIMEOUT and tears it down; false when it had already ended. */
  async expire(id: string, reason: string): Promise<boolean> {
    if (!this.bundles.machine(id)) await this.bundles.reachPeer(id);
    const changed = await this.deps.store.updateSandbox(
      id,
      { status: "TIMEOUT", error_reason: reason, terminated_at: new Date().toISOString() },
      ACTIVE,
    );
    if (changed) await this.deps.store.addEvent(id, `timeout: ${reason}`);
    await this.teardown(id);
    return changed;
  }

  async logs(teamId: string, id: string, tailBytes: number) {
    await this.get(teamId, id);
    return await sandboxLogs(this.deps.store, this.bundles.of(id).host, id, tailBytes);
  }

  /** Resolves when the sandbox's adoption after a restart has settled (undefined: none in flight). */
  whenAdopted(id: string): Promise<void> | undefined {
    return this.bundles.adoption(id)?.done;
  }

  /**
   * After a restart: adopts the local host's surviving machines, marks lost sandboxes ERROR (see
   * Reconciler). Resolves once every decision is taken; `settled` when every adoption has.
   */
  reconcile(opts: ReconcileOptions = {}): Promise<ReconcileResult> {
    return this.bundles.local.reconciler.reconcile(opts);
  }

  /** Ordered, idempotent shutdown: stop taking work, stop every machine, mark them TERMINATED. */
  async close(): Promise<void> {
    this.closing = true;
    // Adoptions still running are cancelled (their machine is killed); the loop below marks them TERMINATED.
    const ids = new Set([...(await this.bundles.close("the server is shutting down")), ...this.provisioning.keys()]);
    await Promise.allSettled(
      [...ids].map(async (id) => {
        await this.deps.store.updateSandbox(
          id,
          { status: "TERMINATED", error_reason: "the server shut down", terminated_at: new Date().toISOString() },
          ACTIVE,
        );
        await this.teardown(id);
      }),
    );
  }

  /** The sandbox networks of the host a sandbox runs on (its policy, address, tunnels are kept there). */
  networkOf(id: string): NetworkService | undefined {
    return this.bundles.of(id).network;
  }

  /** Whether the sandbox is attached to its host's sandbox networks with its network on. */
  hasNetwork(id: string): boolean {
    return this.bundles.of(id).network?.hasNetwork(id) ?? false;
  }
}
