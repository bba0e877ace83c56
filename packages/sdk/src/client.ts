import { ServerVersion } from "@sandtree/protocol";
import { Checkpoints } from "./checkpoints.js";
import { Desktop } from "./desktop.js";
import { ConfigurationError } from "./errors.js";
import { Files } from "./files.js";
import { Hosts } from "./hosts.js";
import { HttpClient, type RequestOptions } from "./http.js";
import { Images } from "./images.js";
import { Keys } from "./keys.js";
import { DEFAULT_RETRY, type ResolvedRetry, type RetryOptions } from "./retry.js";
import { Sandboxes } from "./sandboxes.js";
import { Teams } from "./teams.js";
import { Usage } from "./usage.js";
import { VERSION } from "./version.js";
import { Volumes } from "./volumes.js";

export const DEFAULT_API_URL = "http://127.0.0.1:7070";
export const DEFAULT_TIMEOUT_MS = 60_000;

export interface SandtreeClientOptions {
  /** Default: SANDTREE_API_URL, then http://127.0.0.1:7070. */
  apiUrl?: string;
  /** Default: SANDTREE_API_KEY. Required. */
  apiKey?: string;
  /** Deadline of ordinary requests (default 60 s; 0 disables). Long transfers and exec streams only bound the wait for headers. */
  timeoutMs?: number;
  /** A fetch implementation (default: Node's global fetch). */
  fetch?: typeof globalThis.fetch;
  /** Retries of 429, 5xx and connection errors (default 5 attempts; SANDTREE_MAX_ATTEMPTS). */
  retry?: RetryOptions;
  /** Where SANDTREE_* variables are read from (default process.env). */
  env?: Record<string, string | undefined>;
  /** A product token sent before the SDK's own User-Agent (`my-trainer/1.2 sandtree-sdk/0.1.0 node/20.11.0`). */
  userAgent?: string;
}

export interface ResolvedConfig {
  apiUrl: string;
  apiKey: string;
  timeoutMs: number;
  retry: ResolvedRetry;
  /** `[<userAgent> ]sandtree-sdk/<version> node/<version>`: the server warns when it is older than this SDK. */
  userAgent: string;
}

/** Precedence: explicit option, then SANDTREE_* environment variable, then the default. */
export function resolveConfig(options: SandtreeClientOptions = {}): ResolvedConfig {
  const env = options.env ?? process.env;
  const apiUrl = options.apiUrl || env.SANDTREE_API_URL || DEFAULT_API_URL;
  const apiKey = options.apiKey || env.SANDTREE_API_KEY;
  if (!apiKey) {
    throw new ConfigurationError(
      "MISSING_API_KEY",
      "no API key: pass { apiKey } or set SANDTREE_API_KEY (`sandtree serve` writes it to <data-dir>/credentials.env; `source` that file)",
    );
  }
  try {
    const url = new URL(apiUrl);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    throw new ConfigurationError(
      "INVALID_API_URL",
      `API URL ${JSON.stringify(apiUrl)} is not an http(s) URL; fix SANDTREE_API_URL or apiUrl`,
    );
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs >= 0)) throw new ConfigurationError("INVALID_TIMEOUT", "timeoutMs must be a number >= 0");
  const envAttempts = env.SANDTREE_MAX_ATTEMPTS ? Number(env.SANDTREE_MAX_ATTEMPTS) : undefined;
  const retry: ResolvedRetry = {
    ...DEFAULT_RETRY,
    ...(envAttempts !== undefined ? { maxAttempts: envAttempts } : {}),
    ...Object.fromEntries(Object.entries(options.retry ?? {}).filter(([, v]) => v !== undefined)),
  };
  if (!(Number.isInteger(retry.maxAttempts) && retry.maxAttempts >= 1)) {
    throw new ConfigurationError("INVALID_RETRY", "retry.maxAttempts (or SANDTREE_MAX_ATTEMPTS) must be an integer >= 1");
  }
  const own = `sandtree-sdk/${VERSION} node/${process.versions.node}`;
  return { apiUrl, apiKey, timeoutMs, retry, userAgent: options.userAgent ? `${options.userAgent} ${own}` : own };
}

export class SandtreeClient {
  readonly sandboxes: Sandboxes;
  readonly files: Files;
  /** Desktop sessions: actions, their event log, screenshots, replay, VNC. */
  readonly desktop: Desktop;
  readonly images: Images;
  /** Filesystem checkpoints. */
  readonly checkpoints: Checkpoints;
  /** Volumes and their files (no sandbox needed). */
  readonly volumes: Volumes;
  /** Teams and their limits (admin keys). */
  readonly teams: Teams;
  /** Metered usage, cost and stats. */
  readonly usage: Usage;
  /** API keys (admin keys). */
  readonly keys: Keys;
  /** Fleet hosts (admin keys). */
  readonly hosts: Hosts;
  readonly apiUrl: string;
  /** This SDK's version (the whole project shares one). */
  readonly version = VERSION;
  /** What every request sends as its User-Agent. */
  readonly userAgent: string;
  private readonly http: HttpClient;

  constructor(options: SandtreeClientOptions = {}) {
    const config = resolveConfig(options);
    const http = new HttpClient({ ...config, fetch: options.fetch ?? globalThis.fetch });
    this.http = http;
    this.apiUrl = http.apiUrl;
    this.userAgent = http.userAgent;
    this.sandboxes = new Sandboxes(http);
    this.files = new Files(http);
    this.desktop = new Desktop(http);
    this.images = new Images(http);
    this.checkpoints = new Checkpoints(http);
    this.volumes = new Volumes(http);
    this.teams = new Teams(http);
    this.usage = new Usage(http);
    this.keys = new Keys(http);
    this.hosts = new Hosts(http);
  }

  /** The server's version (`GET /v1/version`; needs no key). */
  async serverVersion(options: RequestOptions = {}): Promise<ServerVersion> {
    return this.http.json(ServerVersion, { method: "GET", path: "/v1/version", ...options });
  }
}
