import { randomUUID } from "node:crypto";
import type { ExecCommand, ExecResult, SandtreeClient } from "@sandtree/sdk";
import { type Environment, SetupError } from "./environment.js";
import { Episode } from "./episode.js";
import { Limiter } from "./limiter.js";
import { Pacer } from "./pacing.js";
import { now, Trajectory } from "./trajectory.js";

export const LABEL = "sandtree-rl";

export type Policy<T = unknown> = (ep: Episode) => Promise<T> | T;

export interface EpisodeResult<T = unknown> {
  episodeId: string;
  reward: number | undefined;
  trajectory: Trajectory;
  error?: unknown;
  value?: T;
}

export interface EpisodeRunnerOptions {
  /** Labels the runner's sandboxes (`sandtree-rl=<name>`): a runner restarted under the same name sweeps what its killed predecessor left. */
  name?: string;
  /** Episodes at a time (default 4). */
  concurrency?: number;
  /** Creates in any 10 s window (default: unpaced; 429s are still waited out). */
  creationsPer10s?: number;
  /** "fork": each episode a new sandbox from the set-up checkpoint; "reset": a pool reset in place to a memory checkpoint. */
  mode?: "fork" | "reset";
  labels?: Record<string, string>;
  waitTimeoutMs?: number;
}

/**
 * Prepares an Environment once (setup, then a checkpoint), starts episodes from that state, runs
 * a policy on each under a concurrency limit and creation pacing, and always cleans up: every
 * sandbox carries the runner's labels, a sweep by them runs at start and at close, and each has
 * the environment's hard lifetime.
 */
export class EpisodeRunner {
  readonly name: string;
  readonly concurrency: number;
  readonly mode: "fork" | "reset";
  readonly labels: Record<string, string>;
  readonly pacer: Pacer;
  checkpointId: string | undefined;
  private readonly waitTimeoutMs: number;
  private readonly memoryCheckpoints = new Set<string>();
  private readonly checkpoints: string[] = [];
  private readonly pool: string[] = [];
  private readonly slots: Limiter;
  private closed = false;

  constructor(
    readonly client: SandtreeClient,
    readonly environment: Environment,
    options: EpisodeRunnerOptions = {},
  ) {
    this.name = options.name ?? "default";
    this.concurrency = options.concurrency ?? 4;
    this.mode = options.mode ?? "fork";
    this.labels = { ...(options.labels ?? {}), [LABEL]: this.name };
    this.pacer = new Pacer(options.creationsPer10s);
    this.waitTimeoutMs = options.waitTimeoutMs ?? 600_000;
    this.slots = new Limiter(this.concurrency);
  }

  /** A started runner; `close()` it (in a finally) when done. */
  static async start(
    client: SandtreeClient,
    environment: Environment,
    options: EpisodeRunnerOptions = {},
  ): Promise<EpisodeRunner> {
    const r = new EpisodeRunner(client, environment, options);
    try {
      await r.start();
    } catch (err) {
      await r.close();
      throw err;
    }
    return r;
  }

  /** Sweeps what an earlier runner of this name left, then runs the setup once and saves it. */
  async start(): Promise<void> {
    await this.sweep();
    const env = this.environment;
    const id = await this.newSandbox({ image: env.image });
    try {
      for (const cmd of env.setup ?? []) {
        const r = await this.exec(id, cmd, env.setupTimeoutSeconds);
        if (r.exit_code !== 0)
          throw new SetupError(`setup ${JSON.stringify(cmd)} exited ${r.exit_code}: ${r.stderr.slice(-500)}`);
      }
      this.checkpointId = await this.saveCheckpoint(id, this.mode === "reset");
    } finally {
      // The checkpoint is DURABLE: independent of the sandbox it came from.
      await this.client.sandboxes.delete(id);
    }
  }

  /** Deletes every not yet ended sandbox with this runner's labels; how many there were. */
  async sweep(): Promise<number> {
    return (await this.client.sandboxes.bulkDelete({ labels: this.labels })).deleted.length;
  }

  /** Deletes the runner's sandboxes and checkpoints; safe to call twice, runs every step. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.sweep();
    } finally {
      await Promise.allSettled(this.checkpoints.map((cp) => this.client.checkpoints.delete(cp)));
    }
  }

  exec(id: string, command: ExecCommand, timeoutSeconds?: number): Promise<ExecResult> {
    const env = this.environment;
    return this.client.sandboxes.run(id, command, {
      ...(env.cwd !== undefined ? { cwd: env.cwd } : {}),
      ...(env.env !== undefined ? { env: env.env } : {}),
      ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    });
  }

  /** A RUNNING sandbox with the runner's labels and the environment's lifetime (paced). */
  async newSandbox(from: { image: string } | { checkpointId: string }): Promise<string> {
    const env = this.environment;
    const common = {
      timeout_minutes: env.timeoutMinutes ?? 30,
      labels: { ...this.labels },
      idempotency_key: `rl-${this.name}-${randomUUID()}`,
      ...(env.env !== undefined ? { environment_vars: env.env } : {}),
    };
    const memory = "checkpointId" in from && this.memoryCheckpoints.has(from.checkpointId);
    const size = {
      memory_gb: env.memoryGb ?? 0.25,
      ...(env.cpuCores !== undefined ? { cpu_cores: env.cpuCores } : {}),
    };
    const request =
      "image" in from
        ? { ...common, ...size, image: from.image }
        : memory
          ? { ...common, checkpoint_id: from.checkpointId, restore_memory: true }
          : { ...common, ...size, checkpoint_id: from.checkpointId };
    const sb = await this.pacer.create(this.client, request);
    try {
      await this.client.sandboxes.waitForCreation(sb.id, { timeoutMs: this.waitTimeoutMs });
    } catch (err) {
      await this.client.sandboxes.delete(sb.id);
      throw err;
    }
    return sb.id;
  }

  async saveCheckpoint(sandboxId: string, memory = false): Promise<string> {
    const cp = await this.client.checkpoints.create(sandboxId, memory ? { includeMemory: true } : {});
    this.checkpoints.push(cp.id);
    if (memory) this.memoryCheckpoints.add(cp.id);
    await this.client.checkpoints.waitForCheckpoint(cp.id, { timeoutMs: this.waitTimeoutMs });
    return cp.id;
  }

  private started(): string {
    if (this.checkpointId === undefined || this.closed) throw new Error("the runner is not started (EpisodeRunner.start)");
    return this.checkpointId;
  }

  /** Runs `fn` on an episode from the set-up state; its sandbox is deleted (or pooled) afterwards. */
  async withEpisode<T>(fn: (ep: Episode) => Promise<T>, episodeId?: string): Promise<T> {
    const cp = this.started();
    const tr = new Trajectory(episodeId ?? randomUUID().slice(0, 12));
    const t0 = now();
    if (this.mode === "fork") {
      const id = await this.newSandbox({ checkpointId: cp });
      tr.add({ type: "fork", sandbox_id: id, started_at: t0, checkpoint_id: cp });
      try {
        return await fn(new Episode(this, id, tr));
      } finally {
        await this.client.sandboxes.delete(id);
      }
    }
    const id = await this.takePooled(cp);
    tr.add({ type: "reset", sandbox_id: id, started_at: t0, checkpoint_id: cp });
    try {
      return await fn(new Episode(this, id, tr));
    } finally {
      this.pool.push(id);
    }
  }

  private async takePooled(cp: string): Promise<string> {
    const id = this.pool.shift();
    if (id === undefined) {
      // The pool grows to `concurrency` (the episode slots); a new one is restored from the memory checkpoint already.
      return await this.newSandbox({ checkpointId: cp });
    }
    try {
      await this.client.sandboxes.reset(id, cp);
    } catch (err) {
      await this.client.sandboxes.delete(id);
      throw err;
    }
    return id;
  }

  /** A new episode from a checkpoint of `parent` (its trajectory continues the parent's); `discard` it when done. */
  async openBranch(parent: Episode, checkpointId: string): Promise<Episode> {
    const t0 = now();
    const id = await this.newSandbox({ checkpointId });
    const tr = new Trajectory(
      randomUUID().slice(0, 12),
      parent.trajectory.events.map((e) => ({ ...e })),
    );
    tr.add({ type: "fork", sandbox_id: id, started_at: t0, checkpoint_id: checkpointId });
    return new Episode(this, id, tr);
  }

  /** Deletes a branch's sandbox (twice is fine). */
  async discard(ep: Episode): Promise<void> {
    await this.client.sandboxes.delete(ep.sandboxId);
  }

  /** Runs `policy` on one episode and scores it; a policy's error is thrown after cleanup. */
  runEpisode<T>(policy: Policy<T>, episodeId?: string): Promise<EpisodeResult<T>> {
    return this.slots.use(() =>
      this.withEpisode(async (ep) => {
        const value = await policy(ep);
        const reward = this.environment.verifier !== undefined ? await ep.score() : undefined;
        return { episodeId: ep.id, reward, trajectory: ep.trajectory, value };
      }, episodeId),
    );
  }

  /** `n` episodes, at most `concurrency` at a time; a failed one has `error` set (and no reward). */
  run<T>(policy: Policy<T>, n: number): Promise<EpisodeResult<T>[]> {
    this.started();
    return Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const id = `${this.name}-${i}`;
        try {
          return await this.runEpisode(policy, id);
        } catch (error) {
          return { episodeId: id, reward: undefined, trajectory: new Trajectory(id), error };
        }
      }),
    );
  }
}
