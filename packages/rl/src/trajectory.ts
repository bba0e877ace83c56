import { createHash } from "node:crypto";

/** Events a replay runs again; the others mark states to restart from. */
export const REPLAYED = ["command", "file_write"] as const;
export const STATE_EVENTS = ["fork", "reset", "checkpoint"] as const;

export type EventType = "command" | "file_write" | "fork" | "reset" | "checkpoint" | "verify";

/** One action of an episode (times in seconds since the epoch, as the Python package writes them). */
export interface TrajectoryEvent {
  type: EventType;
  episode_id: string;
  sandbox_id: string;
  started_at: number;
  ended_at: number;
  command?: string | string[];
  exit_code?: number;
  stdout_sha256?: string;
  stderr_sha256?: string;
  path?: string;
  data_b64?: string;
  data_sha256?: string;
  checkpoint_id?: string;
  reward?: number;
}

export function digest(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The same action with the same results (digests and exit code), timestamps aside. */
export function sameOutcome(a: TrajectoryEvent, b: TrajectoryEvent): boolean {
  const keys = ["type", "exit_code", "stdout_sha256", "stderr_sha256", "path", "data_sha256"] as const;
  return keys.every((k) => a[k] === b[k]) && JSON.stringify(a.command) === JSON.stringify(b.command);
}

export class Trajectory {
  constructor(
    readonly episodeId: string,
    readonly events: TrajectoryEvent[] = [],
  ) {}

  add(event: Omit<TrajectoryEvent, "episode_id" | "ended_at">): TrajectoryEvent {
    const e = { ...event, episode_id: this.episodeId, ended_at: Date.now() / 1000 };
    this.events.push(e);
    return e;
  }

  steps(): TrajectoryEvent[] {
    return this.events.filter((e) => (REPLAYED as readonly string[]).includes(e.type));
  }

  toJsonl(): string {
    return this.events.map((e) => `${JSON.stringify(sortKeys(e))}\n`).join("");
  }

  static fromJsonl(text: string): Trajectory {
    const events = text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as TrajectoryEvent);
    return new Trajectory(events[0]?.episode_id ?? "", events);
  }
}

function sortKeys(e: TrajectoryEvent): Record<string, unknown> {
  return Object.fromEntries(Object.entries(e).sort(([a], [b]) => (a < b ? -1 : 1)));
}

export function now(): number {
  return Date.now() / 1000;
}
