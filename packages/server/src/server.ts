import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { defaultDataDir, detectAccel, guestArtifacts, LocalDirBlobStore } from "@sandtree/host";
import { AccelChoice } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { buildApp } from "./app.js";
import { AdmissionService } from "./services/admission-service.js";
import { AuthService } from "./services/auth-service.js";
import { BulkService } from "./services/bulk-service.js";
import { CheckpointService } from "./services/checkpoint-service.js";
import { ExecService } from "./services/exec-service.js";
import { FileService } from "./services/file-service.js";
import { HostImageResolver } from "./services/host-images.js";
import type { ImageResolver } from "./services/image-resolver.js";
import { JobService } from "./services/job-service.js";
import { type LogFormat, prettyLogStream, resolveLogFormat } from "./services/log-format.js";
import type { Logger } from "./services/logger.js";
import { type Clock, systemClock } from "./services/metering/clock.js";
import { MeteringService } from "./services/metering/metering-service.js";
import { loadPriceTable, type PriceTableInput } from "./services/metering/prices.js";
import { MetricsService } from "./services/metrics-service.js";
import { NetworkService } from "./services/network-service.js";
import { PortService } from "./services/port-service.js";
import { PtyService } from "./services/pty-service.js";
import { SandboxService } from "./services/sandbox-service.js";
import { loadOrCreateServerKey, SecretBox } from "./services/secret-box.js";
import type { Services } from "./services/services.js";
import { TeamService } from "./services/team-service.js";
import { TimeoutService } from "./services/timeout-service.js";
import { SqliteStore } from "./store/sqlite-store.js";

export const ServerConfig = z.object({
  dataDir: z.string().min(1).default(defaultDataDir()),
  host: z
    .string()
    .min(1)
    .default(process.env.SANDTREE_HOST ?? "127.0.0.1"),
  port: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(Number(process.env.SANDTREE_PORT ?? 7070)),
  accel: AccelChoice.default((process.env.SANDTREE_ACCEL as AccelChoice | undefined) ?? "auto"),
  logger: z.boolean().default(true),
  /** The log's form: JSON lines, or readable lines ("auto": readable on a terminal). */
  logFormat: z.enum(["auto", "pretty", "json"]).prefault((process.env.SANDTREE_LOG_FORMAT || "auto") as "auto"),
  /** How often expired sandboxes (timeout_minutes, idle_timeout_minutes) are looked for. */
  reaperIntervalMs: z.coerce.number().int().min(100).max(60_000).default(2000),
  /** Sandbox networks: "auto" turns them on when the host allows it (root, nftables, /dev/net/tun). */
  network: z.enum(["auto", "on", "off"]).default((process.env.SANDTREE_NETWORK as "auto" | "on" | "off" | undefined) ?? "auto"),
  /** The sandbox address pool (a /30 each); unset: the first free of 10.201.0.0/16, 10.202.0.0/16, ... */
  networkSubnet: z
    .string()
    .regex(/^\d+\.\d+\.\d+\.\d+\/(1[0-9]|2[0-8])$/, "an IPv4 CIDR from /10 to /28")
    .optional()
    .prefault(process.env.SANDTREE_NETWORK_SUBNET || undefined),
  /** Egress of a sandbox created without network_allowlist or network_denylist. */
  networkDefault: z
    .enum(["allow", "deny"])
    .default((process.env.SANDTREE_NETWORK_DEFAULT as "allow" | "deny" | undefined) ?? "allow"),
  /** Upstream DNS servers for sandboxes ("HOST" or "HOST:PORT"); default /etc/resolv.conf's. */
  dnsUpstreams: z.array(z.string().regex(/^\d+\.\d+\.\d+\.\d+(:\d+)?$/)).default(
    (process.env.SANDTREE_DNS_UPSTREAM ?? "")
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  ),
  /** Each sandbox's DNS budget, "PER_SECOND/BURST" (default 200/400): REFUSED beyond it. */
  dnsRateLimit: z
    .string()
    .regex(/^[1-9]\d{0,5}\/[1-9]\d{0,6}$/, "PER_SECOND/BURST, e.g. 200/400")
    .default(process.env.SANDTREE_DNS_RATE ?? "200/400")
    .transform((v) => {
      const [perSecond, burst] = v.split("/").map(Number) as [number, number];
      return { perSecond, burst };
    }),
  /**
   * The price table (see docs/api.md, "Usage and prices"): JSON text, the path of a JSON file,
   * or the table itself; unset: SANDTREE_PRICES, else the default prices.
   */
  prices: z
    .custom<string | PriceTableInput>((v) => v === undefined || typeof v === "string" || typeof v === "object")
    .optional()
    .prefault(process.env.SANDTREE_PRICES || undefined),
  /** A bearer token that may read GET /metrics (besides admin keys); unset: admin keys only. */
  metricsToken: z
    .string()
    .min(16, "at least 16 characters")
    .optional()
    .prefault(process.env.SANDTREE_METRICS_TOKEN || undefined),
});
export type ServerConfigInput = z.input<typeof ServerConfig>;

/**
 * Deadlines of calls into VMs, in ms (unset in the config: SANDTREE_ADOPT_DEADLINE_MS,
 * SANDTREE_QMP_DEADLINE_MS, SANDTREE_AGENT_DEADLINE_MS, SANDTREE_FREEZE_DEADLINE_MS, read when
 * the server starts, else the defaults). A VM that misses one is failed and killed.
 */
export const VmDeadlines = z.object({
  /** Reconnecting one VM after a restart, all steps together. */
  adoptMs: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** One QMP command (pause, resume, a checkpoint's disk snapshot...). */
  qmpMs: z.coerce.number().int().min(100).max(600_000).default(15_000),
  /** The liveness watchdog's ping (0 turns the watchdog off): bounds every exec, file and job call. */
  agentMs: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
  /** A checkpoint's filesystem freeze. */
  freezeMs: z.coerce.number().int().min(100).max(600_000).default(30_000),
});
export type VmDeadlines = z.infer<typeof VmDeadlines>;

function vmDeadlines(input: Partial<Record<keyof VmDeadlines, number | string>> = {}): VmDeadlines {
  const env = (name: string) => process.env[name] || undefined;
  const r = VmDeadlines.safeParse({
    adoptMs: input.adoptMs ?? env("SANDTREE_ADOPT_DEADLINE_MS"),
    qmpMs: input.qmpMs ?? env("SANDTREE_QMP_DEADLINE_MS"),
    agentMs: input.agentMs ?? env("SANDTREE_AGENT_DEADLINE_MS"),
    freezeMs: input.freezeMs ?? env("SANDTREE_FREEZE_DEADLINE_MS"),
  });
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`invalid VM deadline ${String(issue?.path.join(".") ?? "")}: ${issue?.message ?? "invalid"}`);
  }
  return r.data;
}

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  url: string;
  /** Set on the first start only: the admin key of the default team. */
  firstKey: string | null;
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

/** Builds everything and listens. Resolves once the server accepts connections. */
export interface StartServerOptions {
  images?: ImageResolver;
  /** Deadlines of calls into VMs (default: the SANDTREE_*_DEADLINE_MS variables, see VmDeadlines). */
  deadlines?: Partial<Record<keyof VmDeadlines, number>>;
  /** Where the pino log lines go (default stdout); tests capture them. */
  logStream?: { write(line: string): unknown };
  /** The clock meter records are stamped with (default: the system's); tests control it. */
  clock?: Clock;
}

export async function startServer(input: ServerConfigInput = {}, opts: StartServerOptions = {}): Promise<RunningServer> {
  const cfg = ServerConfig.parse(input);
  const deadlines = vmDeadlines(opts.deadlines);
  mkdirSync(cfg.dataDir, { recursive: true, mode: 0o700 });
  const store = new SqliteStore(path.join(cfg.dataDir, "sandtree.db"));
  // Before anything can change a sandbox's state: every transition is metered on this clock.
  const metering = new MeteringService(store, opts.clock ?? systemClock, loadPriceTable(cfg.prices));
  const guest = guestArtifacts();
  const accel = await detectAccel(cfg.accel);
  const auth = new AuthService(store);
  const firstKey = auth.bootstrap();
  const admission = new AdmissionService(store, new SecretBox(loadOrCreateServerKey(cfg.dataDir)));
  admission.setBudgetCheck((teamId) => metering.checkBudget(teamId));
  const images = opts.images ?? new HostImageResolver();
  let app: FastifyInstance | null = null;
  // Lines logged before the app (and its logger) exists, e.g. by adoption, are written once it does.
  const early: Array<["info" | "warn" | "error", object, string | undefined]> = [];
  const log: Logger = {
    info: (o, m) => (app ? app.log.info(o, m) : early.push(["info", o, m])),
    warn: (o, m) => (app ? app.log.warn(o, m) : early.push(["warn", o, m])),
    error: (o, m) => (app ? app.log.error(o, m) : early.push(["error", o, m])),
  };
  const network = new NetworkService({
    store,
    log: cfg.logger ? log : silentLogger,
    dataDir: cfg.dataDir,
    config: {
      enabled: cfg.network,
      subnet: cfg.networkSubnet,
      defaultPolicy: cfg.networkDefault,
      dnsUpstreams: cfg.dnsUpstreams,
      dnsRateLimit: cfg.dnsRateLimit,
    },
  });
  // Before adoption: rules and tunnels for the sandboxes still active.
  await network.start();
  const sandboxes = new SandboxService({
    network,
    store,
    images,
    dataDir: cfg.dataDir,
    runRoot: runRootFor(cfg.dataDir),
    accel,
    guest,
    log: cfg.logger ? log : silentLogger,
    admission,
    deadlines,
  });
  const checkpoints = new CheckpointService({
    store,
    sandboxes,
    blobs: new LocalDirBlobStore(path.join(cfg.dataDir, "layers")),
    log: cfg.logger ? log : silentLogger,
    deadlines,
  });
  sandboxes.setCheckpointHooks({
    backing: async (cid, signal, opts) => {
      const { path: top, row, memPath } = await checkpoints.restorePath(undefined, cid, signal, opts ?? {});
      return { digest: row.image_digest, layerName: path.basename(top), memPath };
    },
    onTeardown: (id) => checkpoints.onSandboxTeardown(id),
  });
  // Surviving VMs are adopted in the background, each under its own deadline and in parallel:
  // the API answers meanwhile (a sandbox being adopted shows its last status; calls into it wait
  // for its adoption, see SandboxService.whenAdopted). What it decides about each sandbox is
  // taken synchronously here, before any request can arrive.
  void sandboxes.reconcile().catch((err: Error) => log.error({ err: err.message }, "reconciling sandboxes failed"));
  await checkpoints.reconcile();
  sandboxes.pruneTemplates();
  checkpoints.startReaper();
  const timeouts = new TimeoutService({
    store,
    sandboxes,
    log: cfg.logger ? log : silentLogger,
    intervalMs: cfg.reaperIntervalMs,
  });
  timeouts.start();
  const services: Services = {
    auth,
    sandboxes,
    checkpoints,
    exec: new ExecService(sandboxes),
    files: new FileService(sandboxes),
    images,
    teams: new TeamService(store, auth, admission),
    admission,
    timeouts,
    jobs: new JobService(store, sandboxes),
    pty: new PtyService(sandboxes),
    bulk: new BulkService(store, sandboxes, cfg.logger ? log : silentLogger),
    network,
    ports: new PortService(store, sandboxes, (id) => sandboxes.guestAddressOf(id)),
    metering,
    metrics: new MetricsService(store, admission, metering),
  };
  // Exposed ports end with their sandbox.
  sandboxes.onTeardown((id) => services.ports.forget(id));
  const level = process.env.SANDTREE_LOG_LEVEL ?? "info";
  const built = buildApp(services, {
    logger: cfg.logger ? { level, stream: opts.logStream ?? logDestination(cfg.logFormat) } : false,
    metricsToken: cfg.metricsToken,
  });
  app = built;
  for (const [lvl, o, m] of early.splice(0)) built.log[lvl](o, m);
  await built.listen({ host: cfg.host, port: cfg.port });
  const addr = built.server.address();
  const port = typeof addr === "object" && addr ? addr.port : cfg.port;
  const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${port}`;
  let closing: Promise<void> | null = null;
  return {
    app: built,
    services,
    url,
    firstKey,
    close() {
      closing ??= (async () => {
        // Ordered and idempotent: stop accepting, stop VMs (adoptions still running are
        // cancelled first), then close the database.
        await built.close().catch(() => {});
        await timeouts.stop().catch(() => {});
        await checkpoints.close().catch(() => {});
        await sandboxes.close().catch(() => {});
        // Every VM is gone: the rules, taps and resolver go too.
        await network.close({ destroy: true }).catch(() => {});
        store.close();
      })();
      return closing;
    },
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
  const cfg = ServerConfig.parse(input);
  const credFile = path.join(cfg.dataDir, "credentials.env");
  if (server.firstKey) {
    const text = `export SANDTREE_API_URL=${server.url}\nexport SANDTREE_API_KEY=${server.firstKey}\n`;
    writeFileSync(credFile, text, { mode: 0o600 });
    chmodSync(credFile, 0o600);
    process.stdout.write(`\nsandtree is ready. Credentials of the default team (also in ${credFile}):\n\n${text}\n`);
  } else {
    process.stdout.write(`sandtree listening on ${server.url} (credentials in ${credFile})\n`);
  }
  process.stdout.write(`dashboard: ${server.url}/ (sign in with an API key)\n`);
  return server;
}
