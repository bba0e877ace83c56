import path from "node:path";
import type { ServerConfigValues } from "./config.js";
import { openLocalHost } from "./open-local-host.js";
import type { StartServerOptions } from "./server.js";
import type { Foundation } from "./server-foundation.js";
import { CheckpointService } from "./services/checkpoints/checkpoint-service.js";
import { bundleCheckpoints, type CheckpointSites } from "./services/checkpoints/checkpoint-site.js";
import { FleetEvents } from "./services/fleet/fleet-events.js";
import { FleetPlacement } from "./services/fleet/fleet-placement.js";
import { FleetService } from "./services/fleet/fleet-service.js";
import { isLocalHostName, placedOnPeers } from "./services/fleet/host-names.js";
import { LocalHost, localHostName } from "./services/fleet/local-host.js";
import { OpenWorkers } from "./services/fleet/open-workers.js";
import { PeerReach } from "./services/fleet/peer-reach.js";
import { PeerTakeover } from "./services/fleet/peer-takeover.js";
import { RemoteSandboxes } from "./services/fleet/remote-sandboxes.js";
import { VolumeMoves } from "./services/fleet/volume-moves.js";
import { VolumeSyncs } from "./services/fleet/volume-syncs.js";
import { WorkerBundles } from "./services/fleet/worker-bundles.js";
import { ImageAliases } from "./services/images/image-aliases.js";
import type { ImageResolver } from "./services/images/image-resolver.js";
import { systemClock } from "./services/metering/clock.js";
import type { NetworkService } from "./services/network/network-service.js";
import { BundleVolumes } from "./services/sandboxes/bundle-volumes.js";
import type { HostBundles } from "./services/sandboxes/host-bundles.js";
import { HostLostService } from "./services/sandboxes/host-lost-service.js";
import { ACTIVE } from "./services/sandboxes/sandbox-machines.js";
import { SandboxService } from "./services/sandboxes/sandbox-service.js";
import { TimeoutService } from "./services/sandboxes/timeout-service.js";
import { VolumeService } from "./services/volumes/volume-service.js";
import type { HostStore } from "./store/host-store.js";
import { openHostStore, openHostUrls, openImageAliases, openVolumeStore, openVolumeSyncs } from "./store/open-store.js";
import type { UnwindStack } from "./unwind-stack.js";

/** What runs sandboxes: their images and networks and volumes, the fleet, the sandboxes and checkpoints, the reapers. */
export interface Runtime {
  /** The images of the host machines run on (its bases). */
  images: ImageResolver;
  network: NetworkService;
  aliases: ImageAliases;
  volumes: VolumeService;
  fleet: FleetService;
  remote: RemoteSandboxes;
  sandboxes: SandboxService;
  checkpoints: CheckpointService;
  checkpointSites: CheckpointSites;
  timeouts: TimeoutService;
}

/** The sandboxes placed on hosts other than `local` (workers run their machines). */
async function placedOnWorkers(hosts: HostStore): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const h of await hosts.listHosts()) {
    if (isLocalHostName(h.name)) continue;
    for (const p of await hosts.listPlacements(h.id)) ids.add(p.sandbox_id);
  }
  return ids;
}

/**
 * Builds what runs sandboxes, in dependency order, then takes up the work a previous process
 * left (adoption, checkpoints in progress, creates stranded on workers) and starts the reapers.
 */
export async function startRuntime(
  cfg: ServerConfigValues,
  opts: StartServerOptions,
  f: Foundation,
  unwind: UnwindStack,
): Promise<Runtime> {
  const { store, log, admission, accel, blobs } = f;
  const hostRegistry = openHostStore(store);
  // On a store several control planes share, this process's own sandboxes are those placed on its
  // own host (`local-<id>`): a peer's get no rules here.
  const shared = cfg.database !== undefined;
  const ownHostName = localHostName(cfg.dataDir, shared);
  // Volumes' files: the default host makes, serves and mounts them by name here (its volumes port).
  const volumesDir = path.join(cfg.dataDir, "volumes");
  // The sandboxes whose networks are not this host's: a peer's, and those on workers (their hosts have theirs).
  const notMine = async () =>
    new Set([...(shared ? await placedOnPeers(hostRegistry, ownHostName) : []), ...(await placedOnWorkers(hostRegistry))]);
  const { host: machineHost, network } = await openLocalHost(cfg, opts, f, unwind, { notMine, volumesDir });
  // Whether machines here mount volumes is the host's to say (its file server, over its networks).
  const localMounts = machineHost.capabilities.volumes.ok;
  // Image bases are built on the host that runs machines on them (a worker builds its own).
  const images = machineHost.images;
  const aliases = new ImageAliases(openImageAliases(store), images);
  // What the fleet tells the parts that follow it, and which workers' bundles are open: made before
  // them all, so the fleet, the workers' bundles and the sandbox service they open bundles in need
  // no setter (each subscribes to the events when it is built).
  const events = new FleetEvents();
  const doors = new OpenWorkers();
  // Each volume lives on one host and is reached through that host's bundle: this host's (the host
  // machines start on here), or a worker's remote host (its volumes port).
  const volumeHosts = new BundleVolumes(
    (): HostBundles => sandboxes.bundles,
    (hostId) => fleet.hostName(hostId),
  );
  // The fleet's registry before the sandboxes: creates placed on workers start there.
  const fleet: FleetService = new FleetService({
    hosts: hostRegistry,
    urls: openHostUrls(store),
    dataDir: cfg.dataDir,
    log,
    clock: opts.fleetClock ?? systemClock,
    heartbeatIntervalMs: cfg.heartbeatIntervalMs,
    hostLostAfterMs: cfg.hostLostAfterMs,
    blobStore: cfg.blobStore,
    localHostName: ownHostName,
    joinToken: f.joinToken,
    events,
  });
  // A lost host's sandboxes end (after its bundle closed, before its volumes are marked).
  new HostLostService({ store, log, release: (id) => fleet.release(id), events });
  // This host in the fleet's registry, then volume moves a stopped control plane left (they go
  // through workers and the object store): creates placed on workers carry their volumes there.
  const localHost = new LocalHost({ fleet, store, images, dataDir: cfg.dataDir, accel, log });
  await localHost.register();
  const volumeStore = openVolumeStore(store);
  const syncStore = openVolumeSyncs(store);
  // The moves a crash interrupted are finished by resume() once the hosts' bundles are open.
  const moves = new VolumeMoves({ store: volumeStore, syncs: syncStore, hosts: volumeHosts, fleet, blobs, log });
  const volumes = new VolumeService({
    store: volumeStore,
    hosts: volumeHosts,
    limits: (teamId) => admission.limits(teamId),
    log,
    // Creates may name volumes where this host cannot mount them but a host they can move to may (placement decides).
    mountsSupported: localMounts || moves.canMove(),
    // Their file API and deletes bring a worker's volume home first.
    away: moves,
  });
  const volumeSyncs = new VolumeSyncs({
    store: volumeStore,
    syncs: syncStore,
    moves,
    hosts: volumeHosts,
    fleet,
    events,
    log,
    intervalMs: cfg.volumeSyncS * 1000,
  });
  const remote = new RemoteSandboxes({
    fleet,
    store,
    log,
    volumes: { moves },
    reachable: () => doors.hostIds(),
  });
  const sandboxes = new SandboxService({
    volumes,
    network,
    host: machineHost,
    // Each sandbox's volumes are added to its machine's spec on every host (NFS exports granted to its address).
    mountsOf: (id) => volumes.machineMounts(id),
    hostName: ownHostName,
    store,
    images,
    aliases,
    dataDir: cfg.dataDir,
    accel,
    guest: f.guest,
    log,
    admission,
    deadlines: cfg.deadlines,
    warmTemplates: cfg.warmTemplates,
    // Where sandboxes run: here until a worker joins, then here or on a worker (chosen per create).
    placement: (here, hosts) =>
      new FleetPlacement(
        remote,
        fleet,
        here,
        hosts,
        () => placedOnWorkers(hostRegistry),
        (hostId) => doors.whenOpen(hostId),
      ),
    // What peer control planes placed on workers, reached here for access.
    peers: new PeerReach({ fleet, store, log, adoptDeadlineMs: cfg.deadlines.adoptMs }),
  });
  // Adoptions still running are cancelled first, then every VM is stopped.
  unwind.push("sandboxes", () => sandboxes.close().catch(() => {}));
  // This host's volumes mounted again (and creates and deletes finished) before its sandboxes are adopted.
  await volumes.reconcile((hostId) => hostId === null);
  const checkpoints = new CheckpointService({
    host: sandboxes.bundles.local.host,
    store,
    sandboxes,
    blobs,
    log,
    deadlines: cfg.deadlines,
    flattenDepth: cfg.flattenDepth,
  });
  unwind.push("checkpoints", () => checkpoints.close().catch(() => {}));
  const placedHere = shared ? new Set(await fleet.localPlacements()) : null;
  // Surviving VMs are adopted in the background, each under its own deadline and in parallel:
  // the API answers meanwhile (a sandbox being adopted shows its last status; calls into it wait
  // for its adoption, see SandboxService.whenAdopted). What it decides about each sandbox is
  // taken here, before any request can arrive.
  const { settled, owned } = await sandboxes.reconcile({ placedHere });
  void settled.catch((err: Error) => f.early.error({ err: err.message }, "reconciling sandboxes failed"));
  // On a shared store: a checkpoint in progress is this server's to fail when its sandbox is placed
  // here, or has ended (whoever was taking it is gone); another server may be taking the rest.
  await checkpoints.reconcile(async (sandboxId) => {
    if (placedHere === null || placedHere.has(sandboxId)) return true;
    const status = (await store.getSandbox(sandboxId))?.status;
    return status === undefined || !ACTIVE.includes(status);
  });
  sandboxes.pruneTemplates();
  checkpoints.startReaper();
  const timeouts = new TimeoutService({
    store,
    sandboxes,
    log,
    intervalMs: cfg.reaperIntervalMs,
    // A peer control plane's own sandboxes are its to time out.
    ...(shared ? { notMine: () => fleet.peerPlacements() } : {}),
  });
  unwind.push("the timeout reaper", () => timeouts.stop().catch(() => {}));
  timeouts.start();
  // Single-box mode: this process's own VMs are its host (after reconciliation decided which
  // sandboxes are still active).
  await localHost.start(owned);
  // The workers that serve their hosts: each a bundle of the sandbox service, opened now and at
  // each registration (its sandboxes adopted again), dropped when lost; closed before the sandboxes
  // (their machines run on: only this host's stop with this process).
  const workers = new WorkerBundles({
    fleet,
    events,
    doors,
    sandboxes,
    store,
    log,
    dataDir: cfg.dataDir,
    // Whether a worker's sandboxes get networks, and from which pool, is that worker's own setting.
    network: {
      enabled: "auto",
      defaultPolicy: cfg.networkDefault,
      dnsUpstreams: cfg.dnsUpstreams,
      dnsRateLimit: cfg.dnsRateLimit,
    },
  });
  unwind.push("the workers' hosts", () => workers.close());
  // What peer control planes placed on workers: taken over once their placer is lost.
  const peers = new PeerTakeover({ fleet, events, sandboxes, store, log, adoptDeadlineMs: cfg.deadlines.adoptMs });
  unwind.push("peer takeovers", () => peers.stop());
  await workers.openAll();
  // The workers' volumes through their bundles now open, then the moves a stopped control plane left.
  await volumes.reconcile((hostId) => hostId !== null);
  await moves.resume();
  unwind.push("the fleet's reaper", () => fleet.stop());
  fleet.start();
  unwind.push("volume syncs", () => volumeSyncs.stop());
  volumeSyncs.start();
  const checkpointSites = bundleCheckpoints(checkpoints, sandboxes);
  return {
    images,
    network,
    aliases,
    volumes,
    fleet,
    remote,
    sandboxes,
    checkpoints,
    checkpointSites,
    timeouts,
  };
}
