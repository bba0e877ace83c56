import { Checkpoint, CheckpointList, type ForkRequest, Sandbox } from "@sandtree/protocol";
import { z } from "zod";
import { SandtreeSdkError, TimeoutError } from "./errors.js";
import type { HttpClient, RequestOptions } from "./http.js";

/** A checkpoint reached FAILED (or was deleted) while it was awaited. */
export class CheckpointFailedError extends SandtreeSdkError {
  constructor(
    readonly checkpointId: string,
    readonly state: string,
    readonly reason: string | null,
  ) {
    super("CHECKPOINT_FAILED", `checkpoint ${checkpointId} is ${state}${reason ? `: ${reason}` : ""}`);
    this.name = "CheckpointFailedError";
  }
}

export interface WaitForCheckpointOptions {
  /** Give up after this long (default 5 minutes) with a TimeoutError: a timeout is not a failure. */
  timeoutMs?: number;
  intervalMs?: number;
  signal?: AbortSignal;
}

export interface ForkOptions extends RequestOptions {
  name?: string;
  cpuCores?: number;
  memoryGb?: number;
  timeoutMinutes?: number;
  /** How long children placed on another fleet host wait for the checkpoint to become DURABLE (default 300 s; here they start once it is FROZEN). */
  waitTimeoutMs?: number;
  /** Fork with memory: the child resumes with the parent's processes running. */
  memory?: boolean;
  /** Start the children on this fleet host (admin keys only). */
  host?: string;
  /** The parent's volumes: "shared" (default) the same ones, "snapshot" a copy-on-write snapshot of each per child. */
  volumes?: "shared" | "snapshot";
}

const ForkMany = z.object({ sandboxes: z.array(Sandbox), checkpoint_id: z.string() });

const enc = encodeURIComponent;

/** Filesystem checkpoints: create, inspect, wait for DURABLE, delete. */
export class Checkpoints {
  constructor(private readonly http: HttpClient) {}

  /** `includeMemory` saves RAM and device state too: restores resume with processes running. */
  create(
    sandboxId: string,
    options: RequestOptions & { ttlSeconds?: number; includeMemory?: boolean } = {},
  ): Promise<Checkpoint> {
    const { ttlSeconds, includeMemory, ...rest } = options;
    return this.http.json(Checkpoint, {
      ...rest,
      method: "POST",
      path: `/v1/sandboxes/${enc(sandboxId)}/checkpoints`,
      json: {
        ...(ttlSeconds !== undefined ? { ttl_seconds: ttlSeconds } : {}),
        ...(includeMemory ? { include_memory: true } : {}),
      },
    });
  }

  get(id: string, options: RequestOptions = {}): Promise<Checkpoint> {
    return this.http.json(Checkpoint, { ...options, method: "GET", path: `/v1/checkpoints/${enc(id)}` });
  }

  /** The team's checkpoints, or those of one sandbox. */
  async list(sandboxId?: string, options: RequestOptions = {}): Promise<Checkpoint[]> {
    const path = sandboxId === undefined ? "/v1/checkpoints" : `/v1/sandboxes/${enc(sandboxId)}/checkpoints`;
    return (await this.http.json(CheckpointList, { ...options, method: "GET", path })).checkpoints;
  }

  delete(id: string, options: RequestOptions = {}): Promise<Checkpoint> {
    return this.http.json(Checkpoint, { ...options, method: "DELETE", path: `/v1/checkpoints/${enc(id)}` });
  }

  /** Polls until DURABLE; CheckpointFailedError on FAILED/DELETING, TimeoutError when time runs out. */
  async waitForCheckpoint(id: string, options: WaitForCheckpointOptions = {}): Promise<Checkpoint> {
    const timeoutMs = options.timeoutMs ?? 5 * 60_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      options.signal?.throwIfAborted();
      const c = await this.get(id, options.signal ? { signal: options.signal } : {});
      if (c.state === "DURABLE") return c;
      if (c.state === "FAILED" || c.state === "DELETING") throw new CheckpointFailedError(c.id, c.state, c.error);
      if (Date.now() >= deadline) {
        throw new TimeoutError(`checkpoint ${id} was still ${c.state} after ${timeoutMs} ms; wait longer (timeoutMs)`, timeoutMs);
      }
      await new Promise((r) => setTimeout(r, Math.min(options.intervalMs ?? 200, Math.max(1, deadline - Date.now()))));
    }
  }
}

/** Checkpoints the sandbox and starts a child from it (server side; it starts once the checkpoint is FROZEN). */
export function forkSandbox(http: HttpClient, id: string, options: ForkOptions = {}): Promise<Sandbox> {
  const { json, rest, wait } = forkBody(options);
  return http.json(Sandbox, { timeoutMs: wait + 60_000, ...rest, method: "POST", path: `/v1/sandboxes/${enc(id)}/fork`, json });
}

/** Starts `count` children from one checkpoint of the sandbox (with `memory`, all running its processes). */
export function forkMany(
  http: HttpClient,
  id: string,
  count: number,
  options: ForkOptions = {},
): Promise<{ sandboxes: Sandbox[]; checkpoint_id: string }> {
  const { json, rest, wait } = forkBody(options);
  return http.json(ForkMany, {
    timeoutMs: wait + 60_000,
    ...rest,
    method: "POST",
    path: `/v1/sandboxes/${enc(id)}/fork`,
    json: { ...json, count },
  });
}

function forkBody(options: ForkOptions) {
  const { name, cpuCores, memoryGb, timeoutMinutes, waitTimeoutMs, memory, host, volumes, ...rest } = options;
  const json: ForkRequest = {
    ...(memory ? { memory: true } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(cpuCores !== undefined ? { cpu_cores: cpuCores } : {}),
    ...(memoryGb !== undefined ? { memory_gb: memoryGb } : {}),
    ...(timeoutMinutes !== undefined ? { timeout_minutes: timeoutMinutes } : {}),
    ...(waitTimeoutMs !== undefined ? { wait_timeout_seconds: waitTimeoutMs / 1000 } : {}),
    ...(host !== undefined ? { host } : {}),
    ...(volumes !== undefined ? { volumes } : {}),
  };
  return { json, rest, wait: waitTimeoutMs ?? 300_000 };
}
