import type { ExecCommand, ExecResult } from "@sandtree/sdk";
import { rewardOf } from "./environment.js";
import type { EpisodeRunner } from "./runner.js";
import { digest, now, type Trajectory } from "./trajectory.js";

/** An action: a command to run, or a function that acts on the episode. */
export type Action = ExecCommand | ((ep: Episode) => unknown);

/** One sandbox started from a saved state, the policy's actions on it (recorded) and its score. */
export class Episode {
  reward: number | undefined;

  constructor(
    readonly runner: EpisodeRunner,
    readonly sandboxId: string,
    readonly trajectory: Trajectory,
  ) {}

  get id(): string {
    return this.trajectory.episodeId;
  }

  async run(command: ExecCommand, options: { timeoutSeconds?: number } = {}): Promise<ExecResult> {
    const t0 = now();
    const r = await this.runner.exec(this.sandboxId, command, options.timeoutSeconds);
    this.trajectory.add({
      type: "command",
      sandbox_id: this.sandboxId,
      started_at: t0,
      command,
      exit_code: r.exit_code,
      stdout_sha256: digest(r.stdout),
      stderr_sha256: digest(r.stderr),
    });
    return r;
  }

  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    const raw = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
    const t0 = now();
    await this.runner.client.files.write(this.sandboxId, path, raw);
    this.trajectory.add({
      type: "file_write",
      sandbox_id: this.sandboxId,
      started_at: t0,
      path,
      data_b64: raw.toString("base64"),
      data_sha256: digest(raw),
    });
  }

  async act(action: Action): Promise<unknown> {
    return typeof action === "function" ? await action(this) : await this.run(action);
  }

  /** Saves the episode's files (DURABLE before it resolves); replays and branches start here. */
  async checkpoint(): Promise<string> {
    const t0 = now();
    const id = await this.runner.saveCheckpoint(this.sandboxId);
    this.trajectory.add({ type: "checkpoint", sandbox_id: this.sandboxId, started_at: t0, checkpoint_id: id });
    return id;
  }

  /** Runs the environment's verifier: its reward (also kept in `reward`). */
  async score(): Promise<number> {
    const verifier = this.runner.environment.verifier;
    if (verifier === undefined) throw new Error("the environment has no verifier");
    const t0 = now();
    const r = await this.runner.exec(this.sandboxId, verifier);
    this.reward = rewardOf(r);
    this.trajectory.add({
      type: "verify",
      sandbox_id: this.sandboxId,
      started_at: t0,
      command: verifier,
      exit_code: r.exit_code,
      stdout_sha256: digest(r.stdout),
      stderr_sha256: digest(r.stderr),
      reward: this.reward,
    });
    return this.reward;
  }
}
