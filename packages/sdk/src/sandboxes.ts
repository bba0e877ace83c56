import { randomUUID } from "node:crypto";
import {
  BatchStatusResult,
  type BulkDeleteRequest,
  BulkDeleteResult,
  type CreateSandboxRequest,
  type ExecRequest,
  ExecResult,
  type ExposedPort,
  Sandbox,
  SandboxList,
  SandboxLogs,
  type SandboxNetwork,
  type SandboxStatus,
  TERMINAL_STATUSES,
  type UpdateNetworkRequest,
} from "@sandtree/protocol";
import { type ForkOptions, forkMany, forkSandbox } from "./checkpoints.js";
import { InvalidResponseError, SandboxFailedError, TimeoutError } from "./errors.js";
import { EXEC_STREAM_ACCEPT } from "./exec-decoders.js";
import { ExecHandle } from "./exec-handle.js";
import type { HttpClient, RequestOptions } from "./http.js";
import { Jobs, type OutputOptions, readOutput } from "./jobs.js";
import { getNetwork, setNetwork } from "./network.js";
import { exposePort, listPorts, type PortForward, type PortForwardOptions, portForward, unexposePort } from "./ports.js";
import { openPty, type PtyHandle, type PtyOptions } from "./pty-handle.js";
import { sleep } from "./retry.js";

export interface ListSandboxesOptions extends RequestOptions {
  status?: SandboxStatus;
  /** Only sandboxes carrying all of these labels. */
  labels?: Record<string, string>;
  /** Only sandboxes running on this fleet host (admin keys only; `sandtree host list`). */
  host?: string;
  limit?: number;
  cursor?: string;
}

export interface WaitForCreationOptions {
  /** Give up after this long (default 5 minutes) with a TimeoutError. */
  timeoutMs?: number;
  /** Time between polls (default 500 ms). */
  intervalMs?: number;
  signal?: AbortSignal;
  /** Called with every polled state of the sandbox. */
  onProgress?: (sandbox: Sandbox, elapsedMs: number) => void;
}

export interface ExecOptions extends RequestOptions {
  cwd?: string;
  env?: Record<string, string>;
  user?: string;
  /** The server kills the command after this long (exit code 124, timed_out true). */
  timeoutSeconds?: number;
  /** Text written to the command's stdin, which is then closed. */
  stdin?: string;
}

export interface StreamExecOptions extends ExecOptions {
  /** Keep the command's stdin open for writeStdin()/closeStdin() (default false: it reads end-of-file). */
  stdinOpen?: boolean;
  /** Output kept per stream nobody is iterating yet (default 16 MiB); the rest is dropped and counted. */
  maxBufferedBytes?: number;
}

export interface LogsOptions extends RequestOptions {
  tailBytes?: number;
}

export type ExecCommand = ExecRequest["command"];

type RestoreFields = Omit<CreateSandboxRequest, "image" | "disk_size_gb" | "checkpoint_id">;
/** A create from an image, or a restore of a checkpoint (`checkpoint_id` or `checkpointId`). */
export type CreateSandboxInput =
  | CreateSandboxRequest
  | (RestoreFields & { checkpoint_id: string })
  | (RestoreFields & { checkpointId: string });

export class Sandboxes {
  /** Background jobs of a sandbox (start, list, get, output, follow, kill). */
  readonly jobs: Jobs;

  constructor(private readonly http: HttpClient) {
    this.jobs = new Jobs(http);
  }

  /** Deletes the given sandboxes, or every not yet ended one carrying all of `labels` (exactly one of them). */
  bulkDelete(selector: BulkDeleteRequest, options: RequestOptions = {}): Promise<BulkDeleteResult> {
    return this.http.json(BulkDeleteResult, { ...options, method: "POST", path: "/v1/sandboxes/bulk-delete", json: selector });
  }

  /** Status of up to 100 sandboxes in one call; unknown ids come back in `not_found`. */
  batchStatus(ids: string[], options: RequestOptions = {}): Promise<BatchStatusResult> {
    return this.http.json(BatchStatusResult, { ...options, method: "POST", path: "/v1/sandboxes/batch-status", json: { ids } });
  }

  /** Bytes of a buffered exec's whole output (kept on the server by `exec_id` until the sandbox is deleted). */
  execOutput(id: string, execId: string, options: OutputOptions = {}): Promise<Uint8Array> {
    return readOutput(this.http, `${sandboxPath(id)}/execs/${encodeURIComponent(execId)}/output`, options);
  }

  /**
   * Creates a sandbox; it is PENDING until provisioned (see waitForCreation). Without an
   * `idempotency_key` one is generated and reused across retries, so a retry never creates a second sandbox.
   */
  create(request: CreateSandboxInput, options: RequestOptions = {}): Promise<Sandbox> {
    // `checkpointId` restores a checkpoint: image and disk size then come from it.
    const { checkpointId, ...wire } = request as CreateSandboxRequest & { checkpointId?: string };
    const json = {
      ...wire,
      ...(checkpointId !== undefined ? { checkpoint_id: checkpointId } : {}),
      idempotency_key: request.idempotency_key ?? `sdk-${randomUUID()}`,
    };
    return this.http.json(Sandbox, { ...options, method: "POST", path: "/v1/sandboxes", json, idempotent: true });
  }

  /** Stops the sandbox's CPUs; memory and disk stay and it counts toward no active quota. */
  pause(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json(Sandbox, { ...options, method: "POST", path: `${sandboxPath(id)}/pause` });
  }

  /** Continues a paused sandbox with every process as it was. */
  resume(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json(Sandbox, { ...options, method: "POST", path: `${sandboxPath(id)}/resume` });
  }

  /** Checkpoints the sandbox and starts a child with its files, once the checkpoint is FROZEN (see ForkOptions). */
  fork(id: string, options: ForkOptions = {}): Promise<Sandbox> {
    return forkSandbox(this.http, id, options);
  }

  /** Starts `count` children from one checkpoint; with `memory: true` each resumes the parent's processes. */
  forkMany(id: string, count: number, options: ForkOptions = {}): Promise<{ sandboxes: Sandbox[]; checkpoint_id: string }> {
    return forkMany(this.http, id, count, options);
  }

  /** Puts a running sandbox back to a memory checkpoint's state, keeping its id (an RL episode reset). */
  reset(id: string, checkpointId: string, options: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json(Sandbox, {
      timeoutMs: 300_000,
      ...options,
      method: "POST",
      path: `${sandboxPath(id)}/reset`,
      json: { checkpoint_id: checkpointId },
    });
  }

  get(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json(Sandbox, { ...options, method: "GET", path: sandboxPath(id) });
  }

  /** One page of sandboxes; pass `next_cursor` back as `cursor` for the next one. */
  list(options: ListSandboxesOptions = {}): Promise<SandboxList> {
    const { status, labels, host, limit, cursor, ...rest } = options;
    return this.http.json(SandboxList, {
      ...rest,
      method: "GET",
      path: "/v1/sandboxes",
      query: {
        status,
        label: Object.entries(labels ?? {}).map(([k, v]) => `${k}=${v}`),
        host,
        limit,
        cursor,
      },
    });
  }

  /** Every sandbox matching the filters, fetching pages as the iteration goes. */
  async *listAll(options: Omit<ListSandboxesOptions, "cursor"> = {}): AsyncGenerator<Sandbox, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: SandboxList = await this.list(cursor === undefined ? options : { ...options, cursor });
      yield* page.sandboxes;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Terminates a sandbox and frees its resources; deleting twice is fine. */
  delete(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json(Sandbox, { ...options, method: "DELETE", path: sandboxPath(id) });
  }

  logs(id: string, options: LogsOptions = {}): Promise<SandboxLogs> {
    const { tailBytes, ...rest } = options;
    return this.http.json(SandboxLogs, {
      ...rest,
      method: "GET",
      path: `${sandboxPath(id)}/logs`,
      query: { tail_bytes: tailBytes },
    });
  }

  /**
   * Polls until the sandbox is RUNNING. Throws SandboxFailedError when it reaches ERROR,
   * TIMEOUT or TERMINATED, and TimeoutError when `timeoutMs` runs out first.
   */
  async waitForCreation(id: string, options: WaitForCreationOptions = {}): Promise<Sandbox> {
    const timeoutMs = options.timeoutMs ?? 5 * 60_000;
    const intervalMs = options.intervalMs ?? 500;
    const started = Date.now();
    const deadline = started + timeoutMs;
    let lastStatus: SandboxStatus | undefined;
    for (;;) {
      options.signal?.throwIfAborted();
      const remaining = deadline - Date.now();
      const sandbox = await this.get(id, {
        ...(options.signal ? { signal: options.signal } : {}),
        timeoutMs: Math.max(1, Math.min(30_000, remaining)),
      }).catch((err: unknown) => {
        if (err instanceof TimeoutError && Date.now() >= deadline) return undefined;
        throw err;
      });
      if (sandbox) {
        lastStatus = sandbox.status;
        options.onProgress?.(sandbox, Date.now() - started);
        if (sandbox.status === "RUNNING") return sandbox;
        if (TERMINAL_STATUSES.includes(sandbox.status)) {
          throw new SandboxFailedError(sandbox.id, sandbox.status, sandbox.error_reason, sandbox.error_code ?? null);
        }
      }
      if (Date.now() + intervalMs > deadline) {
        const status = lastStatus ? ` (still ${lastStatus})` : "";
        throw new TimeoutError(
          `sandbox ${id} was not RUNNING after ${timeoutMs} ms${status}; wait longer (timeoutMs) or inspect \`sandtree sandbox logs ${id}\``,
          timeoutMs,
        );
      }
      await sleep(intervalMs, options.signal);
    }
  }

  /** Runs a command and buffers its output (each stream capped at 16 MiB by the server). */
  run(id: string, command: ExecCommand, options: ExecOptions = {}): Promise<ExecResult> {
    const { signal, timeoutMs } = options;
    // The answer only comes when the command ends: no client deadline unless asked for.
    const defaultTimeout = options.timeoutSeconds !== undefined ? options.timeoutSeconds * 1000 + 30_000 : 0;
    return this.http.json(ExecResult, {
      ...(signal ? { signal } : {}),
      timeoutMs: timeoutMs ?? defaultTimeout,
      method: "POST",
      path: `${sandboxPath(id)}/exec`,
      accept: "application/json",
      json: execBody(command, options),
    });
  }

  /** Starts a command and streams its output; resolves once it started (pid and execId set). */
  async exec(id: string, command: ExecCommand, options: StreamExecOptions = {}): Promise<ExecHandle> {
    const { signal, timeoutMs, maxBufferedBytes } = options;
    const { response, mapError } = await this.http.open({
      ...(signal ? { signal } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      timeoutScope: "headers",
      method: "POST",
      path: `${sandboxPath(id)}/exec`,
      accept: EXEC_STREAM_ACCEPT,
      json: { ...execBody(command, options), ...(options.stdinOpen ? { stdin_open: true } : {}) },
    });
    if (!response.body) throw new InvalidResponseError("the exec answer had no body");
    const handle = new ExecHandle({
      http: this.http,
      sandboxId: id,
      body: response.body,
      contentType: response.headers.get("content-type"),
      mapError,
      maxBufferedBytes,
    });
    try {
      await handle.started();
    } catch (err) {
      await handle.close();
      throw err;
    }
    return handle;
  }

  /**
   * An interactive process on a pseudo-terminal, over a WebSocket (Node: uses `ws`). Default
   * command: the image's shell. Resolves once it runs; refusals throw the usual typed errors.
   */
  pty(id: string, options: PtyOptions = {}): Promise<PtyHandle> {
    return openPty(this.http, sandboxPath(id), options);
  }

  /** The sandbox's address, egress policy, tunnels and whether the policy is applied. */
  network(id: string, options: RequestOptions = {}): Promise<SandboxNetwork> {
    return getNetwork(this.http, id, options);
  }

  /**
   * Replaces the egress policy of a running sandbox: `{network_allowlist}`, `{network_denylist}`,
   * or `{}` for the server's default. Live connections are re-checked at their next packet.
   */
  setNetwork(id: string, policy: UpdateNetworkRequest, options: RequestOptions = {}): Promise<SandboxNetwork> {
    return setNetwork(this.http, id, policy, options);
  }

  /**
   * Makes a port of the sandbox reachable through the server: HTTP and WebSockets at `url`,
   * raw TCP at `tcp_url`, with `token` (shown only now). Exposing it again rotates the token.
   */
  expose(id: string, port: number, options: RequestOptions = {}): Promise<ExposedPort> {
    return exposePort(this.http, id, port, options);
  }

  /** Stops exposing a port; its token stops working at once. */
  unexpose(id: string, port: number, options: RequestOptions = {}): Promise<void> {
    return unexposePort(this.http, id, port, options);
  }

  /** The sandbox's exposed ports (without tokens). */
  listPorts(id: string, options: RequestOptions = {}): Promise<ExposedPort[]> {
    return listPorts(this.http, id, options);
  }

  /**
   * Listens locally (default 127.0.0.1, any free port) and carries every connection to the
   * sandbox's port over a WebSocket. Uses the API key: the port need not be exposed. `close()` stops it.
   */
  portForward(id: string, port: number, options: PortForwardOptions = {}): Promise<PortForward> {
    return portForward(this.http, id, port, options);
  }
}

export function sandboxPath(id: string): string {
  return `/v1/sandboxes/${encodeURIComponent(id)}`;
}

function execBody(command: ExecCommand, o: ExecOptions): ExecRequest {
  return {
    command,
    ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
    ...(o.env !== undefined ? { env: o.env } : {}),
    ...(o.user !== undefined ? { user: o.user } : {}),
    ...(o.timeoutSeconds !== undefined ? { timeout_seconds: o.timeoutSeconds } : {}),
    ...(o.stdin !== undefined ? { stdin: o.stdin } : {}),
  };
}
