import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  type BlobStore,
  detectAccel,
  guestArtifacts,
  ImageStore,
  type MachineHost,
  setKvmCpuModel,
  VolumeFileServer,
  VolumeImages,
  volumeServerUnavailableReason,
} from "@sandtree/host";
import type { FastifyInstance } from "fastify";
import { buildApp } from "./app.js";
import { makeBlobStore } from "./blob-store-config.js";
import { loadConfig, type ServerConfigInput, type ServerConfigValues, type VmDeadlines, workerEnv } from "./config.js";
import { configureServerJail, defaultHost, jailOffWarning } from "./default-host.js";
import { closeDataDir } from "./jail-setup.js";
import { CheckpointService } from "./services/checkpoints/checkpoint-service.js";
import { ExecService } from "./services/commands/exec-service.js";
import { JobService } from "./services/commands/job-service.js";
import { ProcessTable } from "./services/commands/process-table.js";
import { PtyService } from "./services/commands/pty-service.js";
import { DesktopService } from "./services/desktop/desktop-service.js";
import { DirWatchService } from "./services/files/dir-watch-service.js";
import { FileService } from "./services/files/file-service.js";
import { FleetService, isLocalHostName, placedOnPeers } from "./services/fleet/fleet-service.js";
import { loadOrCreateJoinToken } from "./services/fleet/join-token.js";
import { LocalHost, localHostName } from "./services/fleet/local-host.js";
import { RemoteCheckpoints } from "./services/fleet/remote-checkpoints.js";
import { RemoteSandboxes } from "./services/fleet/remote-sandboxes.js";
import { checkSharedKeys } from "./services/fleet/shared-keys.js";
import { StrandedStarts } from "./services/fleet/stranded-starts.js";
import { VolumeMoves } from "./services/fleet/volume-moves.js";
import { workerSides } from "./services/fleet/worker-sides.js";
import { HostImageResolver } from "./services/images/host-images.js";
import { ImageAliases } from "./services/images/image-aliases.js";
import type { ImageResolver } from "./services/images/image-resolver.js";
import { type Clock, systemClock } from "./services/metering/clock.js";
import { MeteringService } from "./services/metering/metering-service.js";
import { loadPriceTable } from "./services/metering/prices.js";
import { GatewayTokens } from "./services/network/gateway-tokens.js";
import { NetworkService } from "./services/network/network-service.js";
import { PortService } from "./services/network/port-service.js";
import { type LogFormat, prettyLogStream, resolveLogFormat } from "./services/observability/log-format.js";
import type { Logger } from "./services/observability/logger.js";
import { MetricsService } from "./services/observability/metrics-service.js";
import { AdmissionService } from "./services/sandboxes/admission-service.js";
import { BulkService } from "./services/sandboxes/bulk-service.js";
import { HostLostService } from "./services/sandboxes/host-lost-service.js";
import { openResourceLimits } from "./services/sandboxes/resource-limits.js";
import { RestoreService } from "./services/sandboxes/restore-service.js";
import { ACTIVE } from "./services/sandboxes/sandbox-machines.js";
import { SandboxService } from "./services/sandboxes/sandbox-service.js";
import { SandboxStarts } from "./services/sandboxes/sandbox-starts.js";
import { SandboxTokens } from "./services/sandboxes/sandbox-tokens.js";
import { TimeoutService } from "./services/sandboxes/timeout-service.js";
import type { Services } from "./services/services.js";
import { AuthService } from "./services/teams/auth-service.js";
import { loadOrCreateServerKey, SecretBox } from "./services/teams/secret-box.js";
import { TeamService } from "./services/teams/team-service.js";
import { MountingHost } from "./services/volumes/mounting-host.js";
import { VolumeService } from "./services/volumes/volume-service.js";
import type { HostStore } from "./store/host-store.js";
import {
  openHostStore,
  openHostUrls,
  openImageAliases,
  openKeyFingerprints,
  openStore,
  openVolumeStore,
} from "./store/open-store.js";
import type { SandboxPatch } from "./store/rows.js";
import type { Store } from "./store/store.js";
import { UnwindStack } from "./unwind-stack.js";

export { ServerConfig, type ServerConfigInput, VmDeadlines } from "./config.js";

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  url: string;
  /** Set on the first start only: the admin key of the default team. */
  firstKey: string | null;
  /** Its store, for the process that embeds it (the worker reads its sandboxes' records). */
  store: Store;
  /** Its data directory, as the config resolved it. */
  dataDir: string;
  close(): Promise<void>;
}

/** Where the log goes when no stream is given: stdout, as JSON or readable lines. */
function logDestination(format: LogFormat): { write(line: string): unknown } {
  return resolveLogFormat(format, process.stdout.isTTY === true) === "pretty" ? prettyLogStream(process.stdout) : process.stdout;
}

const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** Short per-data-dir directory for Unix sockets (paths are limited to 108 bytes). */
function runRootFor(dataDir: string): string {
  const h = createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10);
  return path.join(tmpdir(), `sandtree-${h}`);
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

/** Builds everything and listens. Resolves once the server accepts connections. */
export interface StartServerOptions {
  images?: ImageResolver;
  /** Deadlines of calls into VMs (default: the SANDTREE_*_DEADLINE_MS variables, see VmDeadlines). */
  deadlines?: Partial<Record<keyof VmDeadlines, number>>;
  /** Where the pino log lines go (default stdout); tests capture them. */
  logStream?: { write(line: string): unknown };
  /** The clock meter records are stamped with (default: the system's); tests control it. */
  clock?: Clock;
  /** The clock of fleet heartbeats and the HOST_LOST bound (default: the system's); tests control it. */
  fleetClock?: Clock;
  /** Fleet worker mode: only the control plane's call key (none until registered) is taken, no API key. */
  workerKey?: () => string | null;
  /** Told of every sandbox status change (a worker reports them to its control plane). */
  onSandboxStatus?: (id: string, patch: SandboxPatch) => void;
  /** The blob store, given its local directory (a worker's: the one its control plane names at join). */
  makeBlobs?: (layersDir: string) => BlobStore;
  /**
   * Where machines run (default: this host's microVMs, see default-host.ts). Tests give an in-memory
   * host; another isolation class gives its own.
   */
  host?: MachineHost;
}

export async function startServer(input: ServerConfigInput = {}, opts: StartServerOptions = {}): Promise<RunningServer> {
  const given = { ...input, ...(opts.deadlines ? { deadlines: { ...input.deadlines, ...opts.deadlines } } : {}) };
  // A worker keeps its own state: the control plane's database and object store are not its own.
  const cfg = opts.workerKey ? loadConfig(given, workerEnv()) : loadConfig(given);
  mkdirSync(cfg.dataDir, { recursive: true, mode: 0o700 });
  // A start that fails part way (a port in use, a value found bad late) undoes what it started.
  const unwind = new UnwindStack();
  try {
    return await start(cfg, opts, unwind);
  } catch (err) {
    // The start's own error is the one to report; what undoing it met is secondary.
    await unwind.run().catch(() => {});
    throw err;
  }
}

/** startServer's steps; each pushes its undoing on `unwind` (close() runs it too). */
async function start(cfg: ServerConfigValues, opts: StartServerOptions, unwind: UnwindStack): Promise<RunningServer> {
  const deadlines = cfg.deadlines;
  const store = await openStore(cfg);
  unwind.push("the store", () => store.close());
  if (opts.onSandboxStatus) store.onSandboxStatus(opts.onSandboxStatus);
  // Before anything can change a sandbox's state: every transition is metered on this clock.
  const metering = new MeteringService(store, opts.clock ?? systemClock, loadPriceTable(cfg.prices));
  const guest = guestArtifacts(cfg.cacheDir);
  const jailOff = configureServerJail(cfg);
  // Before the trial boot: it starts a VM with the CPU every later one gets.
  setKvmCpuModel(cfg.kvmCpuModel);
  const accel = await detectAccel(cfg.accel, { trialMs: cfg.accelTrialMs });
  const auth = new AuthService(store);
  const firstKey = await auth.bootstrap();
  let workerTeamId: string | null = null;
  if (opts.workerKey) {
    const team = await store.getTeamByName("default");
    if (!team) throw new Error("a worker's data dir needs its default team");
    auth.useWorkerKey(team.id, opts.workerKey);
    workerTeamId = team.id;
  }
  // Every server on one database holds the same keys: refused here, before anything starts.
  const serverKey = loadOrCreateServerKey(cfg.dataDir);
  const joinToken = loadOrCreateJoinToken(cfg.dataDir);
  await checkSharedKeys(openKeyFingerprints(store), cfg.dataDir, [
    { name: "server.key", key: serverKey },
    { name: "join-token", key: joinToken.token },
  ]);
  if (!jailOff) closeDataDir(cfg.dataDir);
  const admission = new AdmissionService(store, new SecretBox(serverKey));
  admission.setBudgetCheck((teamId) => metering.checkBudget(teamId));
  const images =
    opts.images ??
    new HostImageResolver(
      new ImageStore({
        root: path.join(cfg.cacheDir, "images"),
        insecureRegistries: cfg.insecureRegistries,
        defaultRegistry: cfg.defaultRegistry,
      }),
    );
  let app: FastifyInstance | null = null;
  // Lines logged before the app (and its logger) exists, e.g. by adoption, are written once it does.
  const early: Array<["info" | "warn" | "error", object, string | undefined]> = [];
  const log: Logger = {
    info: (o, m) => (app ? app.log.info(o, m) : early.push(["info", o, m])),
    warn: (o, m) => (app ? app.log.warn(o, m) : early.push(["warn", o, m])),
    error: (o, m) => (app ? app.log.error(o, m) : early.push(["error", o, m])),
  };
  const quiet = cfg.logger ? log : silentLogger;
  if (jailOff) log.warn({ jail: "off", why: jailOff }, jailOffWarning(jailOff));
  // Sandbox disks live beside the layers they overlay: in the local store's directory, or in the
  // local cache of a remote one.
  const layersDir = path.join(cfg.dataDir, "layers");
  const blobs = opts.makeBlobs ? opts.makeBlobs(layersDir) : makeBlobStore(cfg.blobStore, layersDir);
  unwind.push("the blob store", () => blobs.close?.());
  // Volumes' file server (NFS-Ganesha, a child started on the first mount): its ports are chosen
  // now, for the sandboxes' network rules; a host without it refuses mounts (NOT_SUPPORTED).
  const volumeServer =
    cfg.network === "off" || volumeServerUnavailableReason()
      ? undefined
      : await VolumeFileServer.open({ dir: path.join(cfg.dataDir, "volume-server"), log: quiet });
  const volumeImages = new VolumeImages(cfg);
  // The volumes' images are unmounted once Ganesha (which holds them open) is gone.
  unwind.push("the volume file server", () => Promise.resolve(volumeServer?.close()).finally(() => volumeImages.unmountAll()));
  const network = new NetworkService({
    store,
    log: quiet,
    dataDir: cfg.dataDir,
    config: {
      enabled: cfg.network,
      subnet: cfg.networkSubnet,
      defaultPolicy: cfg.networkDefault,
      dnsUpstreams: cfg.dnsUpstreams,
      dnsRateLimit: cfg.dnsRateLimit,
      ...(volumeServer ? { volumePorts: [volumeServer.ports.nfs, volumeServer.ports.mount] } : {}),
    },
  });
  const hostRegistry = openHostStore(store);
  // On a store several control planes share, this process's own sandboxes are those placed on its
  // own host (`local-<id>`): a peer's get no rules here.
  const shared = cfg.database !== undefined;
  const ownHostName = localHostName(cfg.dataDir, shared);
  // Every VM is gone by the time this runs: the rules, taps and resolver go too.
  unwind.push("sandbox networks", () => network.close({ destroy: true }).catch(() => {}));
  // Before adoption: rules and tunnels for the sandboxes still active.
  await network.start(shared ? { notMine: await placedOnPeers(hostRegistry, ownHostName) } : {});
  // A given host (the fake, a remote one) limits its own machines.
  const limiter = opts.host
    ? undefined
    : await openResourceLimits({
        enabled: cfg.resourceLimits,
        dataDir: cfg.dataDir,
        network: network.enabled,
        log: quiet,
      });
  const aliases = new ImageAliases(openImageAliases(store), images);
  const volumes = new VolumeService({
    store: openVolumeStore(store),
    root: path.join(cfg.dataDir, "volumes"),
    limits: (teamId) => admission.limits(teamId),
    log: quiet,
    images: volumeImages,
  });
  await volumes.reconcile();
  volumes.mountsSupported = volumeServer !== undefined;
  const sandboxes = new SandboxService({
    volumes,
    network,
    // Each sandbox's volumes are added to its machine's spec (NFS exports granted to its address).
    host: new MountingHost(
      opts.host ?? defaultHost({ accel, deadlines, volumes: volumeServer, limiter: limiter ?? undefined }),
      (id) => volumes.machineMounts(id),
    ),
    store,
    images,
    aliases,
    dataDir: cfg.dataDir,
    runRoot: runRootFor(cfg.dataDir),
    layersDir: blobs.localDir,
    accel,
    guest,
    log: quiet,
    admission,
    deadlines,
    warmTemplates: cfg.warmTemplates,
    placedElsewhere: () => placedOnWorkers(hostRegistry),
  });
  // Adoptions still running are cancelled first, then every VM is stopped.
  unwind.push("sandboxes", () => sandboxes.close().catch(() => {}));
  const checkpoints = new CheckpointService({
    host: sandboxes.host,
    store,
    sandboxes,
    blobs,
    log: quiet,
    deadlines,
    flattenDepth: cfg.flattenDepth,
  });
  unwind.push("checkpoints", () => checkpoints.close().catch(() => {}));
  // The fleet's registry first: only this process's own host's sandboxes are reconciled.
  const hostLost = new HostLostService({
    store,
    log: quiet,
    release: (id): Promise<boolean> => fleet.release(id),
  });
  const fleet: FleetService = new FleetService({
    hosts: hostRegistry,
    urls: openHostUrls(store),
    dataDir: cfg.dataDir,
    log: quiet,
    clock: opts.fleetClock ?? systemClock,
    heartbeatIntervalMs: cfg.heartbeatIntervalMs,
    hostLostAfterMs: cfg.hostLostAfterMs,
    blobStore: cfg.blobStore,
    localHostName: ownHostName,
    joinToken,
    onHostLost: async (lost): Promise<void> => {
      await hostLost.sandboxesLost(lost);
    },
  });
  const localHost = new LocalHost({ fleet, store, images, dataDir: cfg.dataDir, accel, log: quiet });
  await localHost.register();
  const placedHere = shared ? new Set(await fleet.localPlacements()) : null;
  // Surviving VMs are adopted in the background, each under its own deadline and in parallel:
  // the API answers meanwhile (a sandbox being adopted shows its last status; calls into it wait
  // for its adoption, see SandboxService.whenAdopted). What it decides about each sandbox is
  // taken here, before any request can arrive.
  const { settled, owned } = await sandboxes.reconcile({ placedHere });
  void settled.catch((err: Error) => log.error({ err: err.message }, "reconciling sandboxes failed"));
  // On a shared store: a checkpoint in progress is this server's to fail when its sandbox is placed
  // here, or has ended (whoever was taking it is gone); another server may be taking the rest. One
  // of a sandbox on a worker is being taken there: it is followed again below.
  const onWorkers = await placedOnWorkers(hostRegistry);
  await checkpoints.reconcile(async (sandboxId) => {
    if (onWorkers.has(sandboxId)) return false;
    if (placedHere === null || placedHere.has(sandboxId)) return true;
    const status = (await store.getSandbox(sandboxId))?.status;
    return status === undefined || !ACTIVE.includes(status);
  });
  sandboxes.pruneTemplates();
  checkpoints.startReaper();
  const timeouts = new TimeoutService({
    store,
    sandboxes,
    log: quiet,
    intervalMs: cfg.reaperIntervalMs,
    // A peer control plane's own sandboxes are its to time out.
    ...(shared ? { notMine: () => fleet.peerPlacements() } : {}),
  });
  unwind.push("the timeout reaper", () => timeouts.stop().catch(() => {}));
  timeouts.start();
  // Single-box mode: this process's own VMs are its host (once reconciliation decided which are active).
  await localHost.start(owned);
  const moves = await VolumeMoves.wire({ store: openVolumeStore(store), volumes, fleet, blobs, log: quiet });
  const remote = new RemoteSandboxes({ fleet, store, log: quiet, volumes: { moves, localMounts: volumeServer !== undefined } });
  // Starts a stopped control plane (a lost peer, this one before a restart) left on workers: finished or ended at each reaping.
  const stranded = new StrandedStarts({ fleet, store, remote, log: quiet });
  unwind.push("stranded starts", () => stranded.stop());
  fleet.onReaped(() => stranded.sweep());
  unwind.push("the fleet's reaper", () => fleet.stop());
  fleet.start();
  sandboxes.useRemote(remote);
  fleet.onSandboxReports((host, reports) => remote.applyReports(host, reports));
  const remoteCheckpoints = new RemoteCheckpoints({ store, fleet, remote, log: quiet });
  unwind.push("remote checkpoints", () => remoteCheckpoints.close());
  await remoteCheckpoints.resume();
  fleet.onInventory((host, running) => remote.endedAmong(host, running));
  // A sandbox that ends here (delete, timeout) ends on its worker too.
  sandboxes.onTeardown((id) => remote.teardown(id));
  const exec = new ExecService(sandboxes);
  const files = new FileService(sandboxes);
  const services: Services = {
    auth,
    sandboxes,
    checkpoints,
    restores: new RestoreService({
      sandboxes,
      checkpoints,
      admission,
      network,
      store,
      images,
      accel,
      volumes,
      remoteCheckpoints,
    }),
    exec,
    files,
    volumes,
    images,
    aliases,
    teams: new TeamService(store, auth, admission, (teamId) => openVolumeStore(store).volumeUsage(teamId)),
    admission,
    timeouts,
    jobs: new JobService(store, sandboxes),
    pty: new PtyService(sandboxes),
    processes: new ProcessTable(sandboxes),
    dirWatch: new DirWatchService(files, sandboxes),
    sandboxTokens: new SandboxTokens(serverKey, store),
    starts: new SandboxStarts(sandboxes),
    bulk: new BulkService(store, sandboxes, quiet),
    network,
    ports: new PortService(store, sandboxes, (id) => sandboxes.guestAddressOf(id)),
    gatewayTokens: new GatewayTokens(serverKey, store),
    metering,
    metrics: new MetricsService(store, admission, metering),
    desktop: new DesktopService({ sandboxes, exec, files, log: quiet }),
    fleet,
    remote,
    remoteCheckpoints,
    ...(workerTeamId ? workerSides({ store, blobs, images, volumes, teamId: workerTeamId, disks: sandboxes.host }) : {}),
  };
  // Exposed ports end with their sandbox.
  sandboxes.onTeardown((id) => services.ports.forget(id));
  sandboxes.onTeardown((id) => services.desktop.forget(id));
  sandboxes.onStart((start) => services.desktop.onStart(start));
  const built = buildApp(services, {
    logger: cfg.logger ? { level: cfg.logLevel, stream: opts.logStream ?? logDestination(cfg.logFormat) } : false,
    metricsToken: cfg.metricsToken,
  });
  app = built;
  // First undone: stop accepting.
  unwind.push("the API", () => built.close().catch(() => {}));
  for (const [lvl, o, m] of early.splice(0)) built.log[lvl](o, m);
  await built.listen({ host: cfg.host, port: cfg.port });
  const addr = built.server.address();
  const port = typeof addr === "object" && addr ? addr.port : cfg.port;
  const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${port}`;
  return {
    app: built,
    services,
    url,
    firstKey,
    dataDir: cfg.dataDir,
    store,
    // Ordered and idempotent: stop accepting, stop the background loops, stop VMs, take the
    // networks down, then close the database (the start's steps undone, last first).
    close: () => unwind.run(),
  };
}

/**
 * `sandtree serve`: starts, prints the credentials on first start, stops cleanly on signals.
 * The SIGINT/SIGTERM handlers are installed before anything starts: a signal that arrives while
 * the server is still starting stops it in order once the start is done (adoptions still running
 * are cancelled by close()), instead of killing the process and orphaning the VMs it adopted.
 */
export async function runServer(input: ServerConfigInput = {}): Promise<RunningServer> {
  let server: RunningServer | null = null;
  let stopping = false;
  const shutDown = (s: RunningServer) =>
    s.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  const stop = (sig: string) => {
    if (stopping) {
      process.stdout.write(`received ${sig}, already stopping (SIGKILL forces)\n`);
      return;
    }
    stopping = true;
    process.stdout.write(`received ${sig}, stopping sandboxes...\n`);
    if (server) void shutDown(server);
    // Otherwise the start is still running: it is closed the moment it returns.
  };
  const onSigint = () => stop("SIGINT");
  const onSigterm = () => stop("SIGTERM");
  process.on("SIGINT", onSigint);
  process.on("SIGTERM", onSigterm);
  try {
    server = await startServer(input);
  } catch (err) {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigterm);
    throw err;
  }
  if (stopping) {
    void shutDown(server);
    return server;
  }
  const credFile = path.join(server.dataDir, "credentials.env");
  if (server.firstKey) {
    const text = `export SANDTREE_API_URL=${server.url}\nexport SANDTREE_API_KEY=${server.firstKey}\n`;
    writeFileSync(credFile, text, { mode: 0o600 });
    chmodSync(credFile, 0o600);
    process.stdout.write(`\nsandtree is ready. Credentials of the default team (also in ${credFile}):\n\n${text}\n`);
  } else {
    process.stdout.write(`sandtree listening on ${server.url} (credentials in ${credFile})\n`);
  }
  process.stdout.write(`dashboard: ${server.url}/ (sign in with an API key)\n`);
  const fleet = server.services.fleet;
  if (fleet.joinTokenCreated) {
    process.stdout.write(
      `\nJoin token for workers (shown once; kept in ${fleet.joinTokenFile}):\n\n  ${fleet.joinToken}\n\n` +
        `  sandtree worker --join ${server.url} --join-token <token>\n`,
    );
  } else {
    process.stdout.write(`workers join with the token in ${fleet.joinTokenFile}\n`);
  }
  return server;
}
