import type { EpisodeRunner } from "./runner.js";
import { digest, now, REPLAYED, STATE_EVENTS, sameOutcome, Trajectory, type TrajectoryEvent } from "./trajectory.js";

export interface ReplayResult {
  checkpointId: string;
  original: TrajectoryEvent[];
  replayed: TrajectoryEvent[];
  /** Every replayed step had the original's exit code and output digests. */
  matches: boolean;
}

const isStep = (e: TrajectoryEvent) => (REPLAYED as readonly string[]).includes(e.type);

/**
 * Replays an episode's last `lastK` steps from its nearest checkpoint: a new sandbox restores the
 * last saved state (fork, reset or checkpoint event) before those steps and runs every command and
 * file write after it again; the replayed events are compared by outcome with the originals.
 */
export async function replay(runner: EpisodeRunner, trajectory: Trajectory, lastK: number): Promise<ReplayResult> {
  const events = trajectory.events;
  const steps = events.flatMap((e, i) => (isStep(e) ? [i] : []));
  if (!(lastK > 0 && lastK <= steps.length)) throw new RangeError(`lastK must be 1..${steps.length}`);
  const first = steps[steps.length - lastK] ?? 0;
  let base = first;
  while (base >= 0 && !((STATE_EVENTS as readonly string[]).includes(events[base]?.type ?? "") && events[base]?.checkpoint_id))
    base--;
  const cp = events[base]?.checkpoint_id;
  if (cp === undefined) throw new Error("no checkpoint before those steps");
  const redo = events.slice(base + 1).filter(isStep);
  const id = await runner.newSandbox({ checkpointId: cp });
  const out = new Trajectory(`${trajectory.episodeId}-replay`);
  try {
    for (const e of redo) {
      const t0 = now();
      if (e.type === "command" && e.command !== undefined) {
        const r = await runner.exec(id, e.command);
        out.add({
          type: "command",
          sandbox_id: id,
          started_at: t0,
          command: e.command,
          exit_code: r.exit_code,
          stdout_sha256: digest(r.stdout),
          stderr_sha256: digest(r.stderr),
        });
      } else {
        const data = Buffer.from(e.data_b64 ?? "", "base64");
        await runner.client.files.write(id, e.path ?? "", data);
        out.add({
          type: "file_write",
          sandbox_id: id,
          started_at: t0,
          path: e.path ?? "",
          data_b64: e.data_b64 ?? "",
          data_sha256: digest(data),
        });
      }
    }
  } finally {
    await runner.client.sandboxes.delete(id);
  }
  const original = redo.slice(-lastK);
  const replayed = out.events.slice(-lastK);
  const matches = original.length === replayed.length && original.every((e, i) => sameOutcome(e, replayed[i] as TrajectoryEvent));
  return { checkpointId: cp, original, replayed, matches };
}
