import { mkdirSync } from "node:fs";
import type { MachineHost } from "@sandtree/host";
import type { FastifyInstance } from "fastify";
import { buildApp } from "./app.js";
import { loadConfig, type ServerConfigInput, type ServerConfigValues, type VmDeadlines } from "./config.js";
import { openFoundation } from "./server-foundation.js";
import { startRuntime } from "./server-runtime.js";
import { composeServices } from "./server-services.js";
import type { Clock } from "./services/metering/clock.js";
import { type LogFormat, prettyLogStream, resolveLogFormat } from "./services/observability/log-format.js";
import type { Services } from "./services/services.js";
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

/** Builds everything and listens. Resolves once the server accepts connections. */
export interface StartServerOptions {
  /** Deadlines of calls into VMs (default: the SANDTREE_*_DEADLINE_MS variables, see VmDeadlines). */
  deadlines?: Partial<Record<keyof VmDeadlines, number>>;
  /** Where the pino log lines go (default stdout); tests capture them. */
  logStream?: { write(line: string): unknown };
  /** The clock meter records are stamped with (default: the system's); tests control it. */
  clock?: Clock;
  /** The clock of fleet heartbeats and the HOST_LOST bound (default: the system's); tests control it. */
  fleetClock?: Clock;
  /**
   * Where machines run (default: this host's microVMs, see default-host.ts). Tests give an in-memory
   * host; another isolation class gives its own.
   */
  host?: MachineHost;
}

export async function startServer(input: ServerConfigInput = {}, opts: StartServerOptions = {}): Promise<RunningServer> {
  const given = { ...input, ...(opts.deadlines ? { deadlines: { ...input.deadlines, ...opts.deadlines } } : {}) };
  const cfg = loadConfig(given);
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

/** startServer's steps, in dependency order; each pushes its undoing on `unwind` (close() runs it too). */
async function start(cfg: ServerConfigValues, opts: StartServerOptions, unwind: UnwindStack): Promise<RunningServer> {
  const foundation = await openFoundation(cfg, opts, unwind);
  const runtime = await startRuntime(cfg, opts, foundation, unwind);
  const services = composeServices(foundation, runtime);
  const app = buildApp(services, {
    logger: cfg.logger ? { level: cfg.logLevel, stream: opts.logStream ?? logDestination(cfg.logFormat) } : false,
    metricsToken: cfg.metricsToken,
  });
  // First undone: stop accepting.
  unwind.push("the API", () => app.close().catch(() => {}));
  foundation.early.attach(app.log);
  await app.listen({ host: cfg.host, port: cfg.port });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : cfg.port;
  const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${port}`;
  return {
    app,
    services,
    url,
    firstKey: foundation.firstKey,
    dataDir: cfg.dataDir,
    store: foundation.store,
    // Ordered and idempotent: stop accepting, stop the background loops, stop VMs, take the
    // networks down, then close the database (the start's steps undone, last first).
    close: () => unwind.run(),
  };
}
