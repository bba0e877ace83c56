import {
  type ErrorBody,
  HeartbeatResponse,
  type HostCapacity,
  type HostLocality,
  RegisterHostResponse,
} from "@sandtree/protocol";

export interface WorkerAgentOptions {
  /**
   * The control planes' URLs (several processes sharing one database): every call goes to the
   * current one; one that cannot be reached (or answers 5xx) hands the call to the next.
   */
  joinUrls: readonly string[];
  joinToken: string;
  /** This host's name in the fleet. */
  name: string;
  /** What this machine offers now (read again before every heartbeat). */
  capacity(): HostCapacity;
  /** What it holds now: image digests, templates, layers. */
  locality(): Promise<HostLocality>;
  version?: string;
  /** Where the control plane reaches this worker's sandbox API (absent: it runs nothing). */
  url?: string;
  /** Where the control plane reaches this worker's machine host (serveMachineHost's URL). */
  hostUrl?: string;
  /** This worker's own blob-store setting, if any: the control plane refuses the join unless it is its own. */
  blobStore?: string;
  /** Told of every registration (the first and each again): the host id and its new secret. */
  onRegistered?: (r: RegisterHostResponse) => void;
  fetch?: typeof fetch;
  log?: (line: string) => void;
  /** Each request's deadline (default 10 s). */
  requestTimeoutMs?: number;
}

/** A failure answered by the control plane, with its stable code. */
export class JoinError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "JoinError";
  }
}

/**
 * The worker side of fleet mode: registers this machine with the join token, then heartbeats
 * with the host secret it got, sending capacity and locality when they change. A heartbeat
 * refused as unauthorized (the host was registered again elsewhere) registers again; one that
 * fails to arrive at any control plane is retried at the next beat.
 */
export class WorkerAgent {
  private hostId: string | null = null;
  private secret: string | null = null;
  private intervalMs = 5000;
  private timer: NodeJS.Timeout | null = null;
  private sent = { capacity: "", locality: "" };
  private beating: Promise<void> | null = null;
  /** Index in joinUrls of the control plane calls go to. */
  private current = 0;
  /** Heartbeats answered, for the status line. */
  beats = 0;

  constructor(private readonly o: WorkerAgentOptions) {
    if (o.joinUrls.length === 0) throw new Error("a worker needs at least one control plane URL");
  }

  /** The control plane the worker talks to now. */
  get joinUrl(): string {
    return this.o.joinUrls[this.current] as string;
  }

  get id(): string | null {
    return this.hostId;
  }

  get heartbeatIntervalMs(): number {
    return this.intervalMs;
  }

  /**
   * One call, to the current control plane first, then to each other one in turn while the call
   * fails to arrive or gets a 5xx (that process is gone or failing: its peers share the database,
   * so the host's id and secret hold there too). The first that answers becomes the current one.
   * An answer of 4xx is the control plane's word and is not retried elsewhere.
   */
  private async call<T>(schema: { parse(v: unknown): T }, path: string, token: string, body: unknown): Promise<T> {
    const urls = this.o.joinUrls;
    let last: unknown;
    for (let i = 0; i < urls.length; i++) {
      const at = (this.current + i) % urls.length;
      try {
        const r = await this.callAt(urls[at] as string, schema, path, token, body);
        if (at !== this.current) this.o.log?.(`control plane ${urls[this.current]} failed: now using ${urls[at]}`);
        this.current = at;
        return r;
      } catch (err) {
        if (err instanceof JoinError && err.status < 500) throw err;
        last = err;
      }
    }
    throw last;
  }

  private async callAt<T>(
    base: string,
    schema: { parse(v: unknown): T },
    path: string,
    token: string,
    body: unknown,
  ): Promise<T> {
    const res = await (this.o.fetch ?? fetch)(new URL(path, base), {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 10_000),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new JoinError(res.status, "BAD_ANSWER", `${path} answered ${res.status} without JSON: ${text.slice(0, 200)}`);
    }
    if (!res.ok) {
      const e = parsed as Partial<ErrorBody>;
      throw new JoinError(
        res.status,
        e.code ?? "UNKNOWN",
        `${path}: ${res.status} ${e.code ?? ""} ${e.message ?? text.slice(0, 200)}`,
      );
    }
    return schema.parse(parsed);
  }

  /** Registers (or registers again): this host's id and a fresh secret. */
  async register(): Promise<RegisterHostResponse> {
    const capacity = this.o.capacity();
    const locality = await this.o.locality();
    const r = await this.call(RegisterHostResponse, "/v1/fleet/hosts/register", this.o.joinToken, {
      name: this.o.name,
      capacity,
      locality,
      ...(this.o.version ? { version: this.o.version } : {}),
      ...(this.o.url ? { url: this.o.url } : {}),
      ...(this.o.hostUrl ? { host_url: this.o.hostUrl } : {}),
      ...(this.o.blobStore ? { blob_store: this.o.blobStore } : {}),
    });
    this.o.onRegistered?.(r);
    this.hostId = r.host_id;
    this.secret = r.secret;
    this.intervalMs = r.heartbeat_interval_ms;
    this.sent = { capacity: JSON.stringify(capacity), locality: JSON.stringify(locality) };
    return r;
  }

  /** One heartbeat; capacity and locality only when they changed since the last one sent. */
  async beat(): Promise<HeartbeatResponse> {
    if (!this.hostId || !this.secret) await this.register();
    const capacity = this.o.capacity();
    const locality = await this.o.locality();
    const c = JSON.stringify(capacity);
    const l = JSON.stringify(locality);
    try {
      const r = await this.call(HeartbeatResponse, `/v1/fleet/hosts/${this.hostId}/heartbeat`, this.secret as string, {
        ...(c !== this.sent.capacity ? { capacity } : {}),
        ...(l !== this.sent.locality ? { locality } : {}),
      });
      this.sent = { capacity: c, locality: l };
      this.intervalMs = r.heartbeat_interval_ms;
      this.beats++;
      return r;
    } catch (err) {
      if (err instanceof JoinError && err.status === 401) {
        this.o.log?.("heartbeat refused (401): registering again");
        await this.register();
        return this.beat();
      }
      throw err;
    }
  }

  /** Registers, then heartbeats until stop(); a failed beat is logged and retried at the next. */
  async start(): Promise<RegisterHostResponse> {
    const r = await this.register();
    const tick = () => {
      this.beating = this.beat().then(
        () => {},
        (err: Error) => this.o.log?.(`heartbeat failed: ${err.message}`),
      );
      void this.beating.finally(() => {
        if (this.timer) this.timer = setTimeout(tick, this.intervalMs);
      });
    };
    this.timer = setTimeout(tick, this.intervalMs);
    return r;
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.beating;
  }
}
