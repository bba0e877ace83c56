import { cacheDir, defaultDataDir, KVM_CPU_MODEL_PATTERN } from "@sandtree/host";
import { AccelChoice, SandtreeError } from "@sandtree/protocol";
import { z } from "zod";
import { BlobStoreUrl } from "./blob-store-config.js";
import type { PriceTableInput } from "./services/metering/prices.js";

/**
 * Every setting of `sandtree serve`, parsed once at start. Precedence: the explicit option, then
 * its `SANDTREE_*` environment variable, then the documented default. Nothing else in the server
 * or the host reads the environment: host modules take their settings as arguments.
 */

/** Deadlines of calls into VMs, in ms. A VM that misses one is failed and killed. */
export const VmDeadlines = z.object({
  /** Reconnecting one VM after a restart, all steps together (SANDTREE_ADOPT_DEADLINE_MS). */
  adoptMs: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** One QMP command: pause, resume, a checkpoint's disk snapshot (SANDTREE_QMP_DEADLINE_MS). */
  qmpMs: z.coerce.number().int().min(100).max(600_000).default(15_000),
  /** The liveness watchdog's ping, 0 turns it off: bounds every exec, file and job call (SANDTREE_AGENT_DEADLINE_MS). */
  agentMs: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
  /** A checkpoint's filesystem freeze (SANDTREE_FREEZE_DEADLINE_MS). */
  freezeMs: z.coerce.number().int().min(100).max(600_000).default(30_000),
});
export type VmDeadlines = z.infer<typeof VmDeadlines>;

const boolText = z.union([z.boolean(), z.enum(["0", "1", "true", "false"]).transform((v) => v === "1" || v === "true")]);

export const ServerConfig = z.object({
  /** Database, sandboxes, layers, credentials (SANDTREE_DATA_DIR; default ~/.local/share/sandtree). */
  dataDir: z.string().min(1).default(defaultDataDir()),
  /** Kernel, guest and images built by setup (SANDTREE_CACHE_DIR; default ~/.cache/sandtree). */
  cacheDir: z.string().min(1).default(cacheDir()),
  /**
   * The database (SANDTREE_DATABASE_URL): a postgres:// or postgresql:// URL puts the store on
   * PostgreSQL, which several servers can share; unset: SQLite, sandtree.db in the data dir.
   */
  database: z
    .string()
    .refine((v) => {
      try {
        const u = new URL(v);
        return (u.protocol === "postgres:" || u.protocol === "postgresql:") && (u.hostname !== "" || u.searchParams.has("host"));
      } catch {
        return false;
      }
    }, "a postgres:// or postgresql:// URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE)")
    .optional(),
  host: z.string().min(1).default("127.0.0.1"),
  port: z.coerce.number().int().min(0).max(65535).default(7070),
  accel: AccelChoice.default("auto"),
  /**
   * How long `accel: auto`'s trial KVM boot may take to reach the agent (SANDTREE_ACCEL_TRIAL_MS).
   * A working KVM boots in well under a second, a broken one hangs; nested KVM under an emulated
   * CPU (a sandtree inside a sandbox) takes seconds to tens of seconds.
   */
  accelTrialMs: z.coerce.number().int().min(1000).max(600_000).default(5000),
  /**
   * The guest CPU under KVM (SANDTREE_KVM_CPU_MODEL): `host`, or a QEMU model every host of the
   * fleet has, so saved states move between hosts (docs/architecture.md, Accelerator).
   */
  kvmCpuModel: z.string().regex(KVM_CPU_MODEL_PATTERN, "a QEMU CPU model name (host, EPYC-Milan, ...)").default("host"),
  logger: z.boolean().default(true),
  /** The log's form: JSON lines, or readable lines ("auto": readable on a terminal). */
  logFormat: z.enum(["auto", "pretty", "json"]).default("auto"),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** How often expired sandboxes (timeout_minutes, idle_timeout_minutes) are looked for. */
  reaperIntervalMs: z.coerce.number().int().min(100).max(60_000).default(2000),
  /** Fleet: how often worker hosts heartbeat (SANDTREE_HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs: z.coerce.number().int().min(50).max(600_000).default(5000),
  /** Fleet: a host silent this long is LOST and its sandboxes ERROR HOST_LOST (SANDTREE_HOST_LOST_AFTER_MS). */
  hostLostAfterMs: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /**
   * Fleet with an object store: a volume on a worker is copied to the bucket this often while
   * sandboxes mount it (and once after the last one ends), in seconds (SANDTREE_VOLUME_SYNC_S).
   */
  volumeSyncS: z.coerce.number().int().min(1).max(86_400).default(300),
  /** Sandbox networks: "auto" turns them on when the host allows it (root, nftables, /dev/net/tun). */
  network: z.enum(["auto", "on", "off"]).default("auto"),
  /** The sandbox address pool (a /30 each); unset: the first free of 10.201.0.0/16, 10.202.0.0/16, ... */
  networkSubnet: z
    .string()
    .regex(/^\d+\.\d+\.\d+\.\d+\/(1[0-9]|2[0-8])$/, "an IPv4 CIDR from /10 to /28")
    .optional(),
  /** Egress of a sandbox created without network_allowlist or network_denylist. */
  networkDefault: z.enum(["allow", "deny"]).default("allow"),
  /** Upstream DNS servers for sandboxes ("HOST" or "HOST:PORT"); default /etc/resolv.conf's. */
  dnsUpstreams: z.array(z.string().regex(/^\d+\.\d+\.\d+\.\d+(:\d+)?$/)).default([]),
  /** Each sandbox's DNS budget, "PER_SECOND/BURST" (default 200/400): REFUSED beyond it. */
  dnsRateLimit: z
    .string()
    .regex(/^[1-9]\d{0,5}\/[1-9]\d{0,6}$/, "PER_SECOND/BURST, e.g. 200/400")
    .default("200/400")
    .transform((v) => {
      const [perSecond, burst] = v.split("/").map(Number) as [number, number];
      return { perSecond, burst };
    }),
  /**
   * The price table (see docs/api.md, "Usage and prices"): JSON text, the path of a JSON file,
   * or the table itself; unset: the default prices.
   */
  prices: z.custom<string | PriceTableInput>((v) => v === undefined || typeof v === "string" || typeof v === "object").optional(),
  /** A bearer token that may read GET /metrics (besides admin keys); unset: admin keys only. */
  metricsToken: z.string().min(16, "at least 16 characters").optional(),
  deadlines: VmDeadlines.prefault({}),
  /**
   * How a volume's size_gb bounds what guests write (docs/volumes.md): "image", its own
   * preallocated ext4 image, loop-mounted (creates refused with VOLUME_BOUND_UNAVAILABLE where the
   * host cannot); "none", bounded by the host's disk only (logged loudly at start).
   */
  volumeBound: z.enum(["image", "none"]).default("image"),
  /** Test-only: every volume image this many MiB whatever its size_gb (the test suite's: 64). */
  volumeImageMiB: z.coerce.number().int().min(16).max(1_048_576).optional(),
  /** Chains at least this deep get their top layer flattened in the background. */
  flattenDepth: z.coerce.number().int().min(2).max(1000).default(16),
  /**
   * Each sandbox's VMM in its own cgroup and its tap rate-limited (docs/limits.md). Off
   * (SANDTREE_RESOURCE_LIMITS=0) is for debugging and benchmarks only, and logged loudly.
   */
  resourceLimits: boolText.default(true),
  /** Warm starts from booted templates (SANDTREE_WARM_TEMPLATES=0 turns them off). */
  warmTemplates: boolText.default(true),
  /**
   * Where image names without a registry (`python:3.11-slim`, `acme/tool`) are pulled from, as
   * Docker does (SANDTREE_DEFAULT_REGISTRY; default Docker Hub, `docker.io`); `none` keeps such
   * names local-only (the store, then the alias table). Names under `sandtree/` never leave the store.
   */
  defaultRegistry: z
    .string()
    .min(1)
    .default("docker.io")
    .transform((v) => (v === "none" ? null : v)),
  /** Registries reached over plain HTTP (SANDTREE_INSECURE_REGISTRIES, comma-separated). */
  insecureRegistries: z.array(z.string().min(1)).default([]),
  /**
   * Where checkpoint layers are stored durably (SANDTREE_BLOB_STORE): a directory, or
   * `s3://BUCKET[/PREFIX]?endpoint=URL&region=R` (see blob-store-config.ts); unset: DATA_DIR/layers.
   */
  blobStore: BlobStoreUrl.optional(),
  /**
   * Each QEMU in its own jail (docs/security.md): its own uid from the pool, a seccomp filter,
   * no capability (SANDTREE_JAIL). `off` is for debugging only: every QEMU then runs as the
   * server's user with no filter, and the server logs a warning at start. Tests never turn it off.
   */
  jail: z.enum(["on", "off"]).default("on"),
  /** The first uid (and gid) of the jail's pool (SANDTREE_JAIL_UID_BASE); uids nothing else on the host uses. */
  jailUidBase: z.coerce.number().int().min(1000).max(4_000_000_000).default(1_100_000),
  /** How many uids the pool holds (SANDTREE_JAIL_UID_COUNT): at least the VMs this host runs at once. */
  jailUidCount: z.coerce.number().int().min(1).max(1_000_000).default(4096),
});
export type ServerConfigInput = z.input<typeof ServerConfig>;
export type ServerConfigValues = z.output<typeof ServerConfig>;

type Env = Record<string, string | undefined>;

const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean);

/** Each setting's environment variable (unset or empty: not given). */
function fromEnv(env: Env): Record<string, unknown> {
  const e = (name: string) => env[name] || undefined;
  return {
    dataDir: e("SANDTREE_DATA_DIR"),
    cacheDir: e("SANDTREE_CACHE_DIR"),
    database: e("SANDTREE_DATABASE_URL"),
    host: e("SANDTREE_HOST"),
    port: e("SANDTREE_PORT"),
    accel: e("SANDTREE_ACCEL"),
    accelTrialMs: e("SANDTREE_ACCEL_TRIAL_MS"),
    kvmCpuModel: e("SANDTREE_KVM_CPU_MODEL"),
    logFormat: e("SANDTREE_LOG_FORMAT"),
    logLevel: e("SANDTREE_LOG_LEVEL"),
    heartbeatIntervalMs: e("SANDTREE_HEARTBEAT_INTERVAL_MS"),
    hostLostAfterMs: e("SANDTREE_HOST_LOST_AFTER_MS"),
    volumeSyncS: e("SANDTREE_VOLUME_SYNC_S"),
    network: e("SANDTREE_NETWORK"),
    networkSubnet: e("SANDTREE_NETWORK_SUBNET"),
    networkDefault: e("SANDTREE_NETWORK_DEFAULT"),
    dnsUpstreams: list(e("SANDTREE_DNS_UPSTREAM")),
    dnsRateLimit: e("SANDTREE_DNS_RATE"),
    prices: e("SANDTREE_PRICES"),
    metricsToken: e("SANDTREE_METRICS_TOKEN"),
    flattenDepth: e("SANDTREE_FLATTEN_DEPTH"),
    volumeBound: e("SANDTREE_VOLUME_BOUND"),
    volumeImageMiB: e("SANDTREE_VOLUME_IMAGE_MIB"),
    warmTemplates: e("SANDTREE_WARM_TEMPLATES"),
    resourceLimits: e("SANDTREE_RESOURCE_LIMITS"),
    defaultRegistry: e("SANDTREE_DEFAULT_REGISTRY"),
    insecureRegistries: list(e("SANDTREE_INSECURE_REGISTRIES")),
    blobStore: e("SANDTREE_BLOB_STORE"),
    jail: e("SANDTREE_JAIL"),
    jailUidBase: e("SANDTREE_JAIL_UID_BASE"),
    jailUidCount: e("SANDTREE_JAIL_UID_COUNT"),
    deadlines: {
      adoptMs: e("SANDTREE_ADOPT_DEADLINE_MS"),
      qmpMs: e("SANDTREE_QMP_DEADLINE_MS"),
      agentMs: e("SANDTREE_AGENT_DEADLINE_MS"),
      freezeMs: e("SANDTREE_FREEZE_DEADLINE_MS"),
    },
  };
}

const ENV_NAMES: Record<string, string> = {
  dataDir: "SANDTREE_DATA_DIR",
  cacheDir: "SANDTREE_CACHE_DIR",
  database: "SANDTREE_DATABASE_URL",
  host: "SANDTREE_HOST",
  port: "SANDTREE_PORT",
  accel: "SANDTREE_ACCEL",
  accelTrialMs: "SANDTREE_ACCEL_TRIAL_MS",
  kvmCpuModel: "SANDTREE_KVM_CPU_MODEL",
  logFormat: "SANDTREE_LOG_FORMAT",
  logLevel: "SANDTREE_LOG_LEVEL",
  heartbeatIntervalMs: "SANDTREE_HEARTBEAT_INTERVAL_MS",
  hostLostAfterMs: "SANDTREE_HOST_LOST_AFTER_MS",
  volumeSyncS: "SANDTREE_VOLUME_SYNC_S",
  network: "SANDTREE_NETWORK",
  networkSubnet: "SANDTREE_NETWORK_SUBNET",
  networkDefault: "SANDTREE_NETWORK_DEFAULT",
  dnsUpstreams: "SANDTREE_DNS_UPSTREAM",
  dnsRateLimit: "SANDTREE_DNS_RATE",
  prices: "SANDTREE_PRICES",
  metricsToken: "SANDTREE_METRICS_TOKEN",
  flattenDepth: "SANDTREE_FLATTEN_DEPTH",
  volumeBound: "SANDTREE_VOLUME_BOUND",
  volumeImageMiB: "SANDTREE_VOLUME_IMAGE_MIB",
  warmTemplates: "SANDTREE_WARM_TEMPLATES",
  resourceLimits: "SANDTREE_RESOURCE_LIMITS",
  defaultRegistry: "SANDTREE_DEFAULT_REGISTRY",
  insecureRegistries: "SANDTREE_INSECURE_REGISTRIES",
  blobStore: "SANDTREE_BLOB_STORE",
  jail: "SANDTREE_JAIL",
  jailUidBase: "SANDTREE_JAIL_UID_BASE",
  jailUidCount: "SANDTREE_JAIL_UID_COUNT",
  "deadlines.adoptMs": "SANDTREE_ADOPT_DEADLINE_MS",
  "deadlines.qmpMs": "SANDTREE_QMP_DEADLINE_MS",
  "deadlines.agentMs": "SANDTREE_AGENT_DEADLINE_MS",
  "deadlines.freezeMs": "SANDTREE_FREEZE_DEADLINE_MS",
};

function defined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/**
 * Parses the configuration once: explicit options over the environment over the defaults.
 * A bad value is refused with VALIDATION_FAILED naming the setting and its variable.
 */
/** A fleet worker's environment: the control plane's database and object store are not its own. */
export function workerEnv(env: Env = process.env): Env {
  return { ...env, SANDTREE_DATABASE_URL: undefined, SANDTREE_BLOB_STORE: undefined };
}

export function loadConfig(input: ServerConfigInput = {}, env: Env = process.env): ServerConfigValues {
  const fromVars = fromEnv(env);
  const given = input as Record<string, unknown>;
  const merged = {
    ...defined(fromVars),
    ...defined(given),
    deadlines: {
      ...defined(fromVars.deadlines as Record<string, unknown>),
      ...defined((given.deadlines as Record<string, unknown> | undefined) ?? {}),
    },
  };
  const r = ServerConfig.safeParse(merged);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue?.path.join(".") ?? "";
    const variable = ENV_NAMES[field];
    const where = variable ? ` (option ${field} or ${variable})` : ` (option ${field})`;
    throw new SandtreeError("VALIDATION_FAILED", `invalid setting${where}: ${issue?.message ?? "invalid"}`, { field });
  }
  const blob = r.data.blobStore;
  // The AWS convention for an S3 store's region, read here with every other variable.
  const awsRegion = env.AWS_REGION || env.AWS_DEFAULT_REGION;
  if (blob?.kind === "s3" && blob.region === undefined && awsRegion)
    return { ...r.data, blobStore: { ...blob, region: awsRegion } };
  return r.data;
}
