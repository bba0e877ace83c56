import type { JobRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";

/**
 * At most this often a running job's output tails are written to its row. A read answers with
 * the tails it just read either way; the job's ending and its sandbox's teardown write at once.
 */
export const TAIL_SAVE_INTERVAL_MS = 5_000;

/** What a read of a job's output files gives (tails as the store keeps them). */
export type TailPatch = Pick<JobRow, "stdout_bytes" | "stderr_bytes" | "stdout_tail" | "stderr_tail">;

interface Entry {
  sandboxId: string;
  /** When the row's tails were last written (Date.now()). */
  savedAt: number;
  /** Tails read since then and not written yet. */
  unsaved: TailPatch | null;
}

function sameAsRow(p: TailPatch, row: JobRow): boolean {
  return (
    p.stdout_bytes === row.stdout_bytes &&
    p.stderr_bytes === row.stderr_bytes &&
    p.stdout_tail === row.stdout_tail &&
    p.stderr_tail === row.stderr_tail
  );
}

/**
 * Throttles the writes of running jobs' tails (two 16 KiB strings) to their rows: a client that
 * polls a chatty job would otherwise rewrite its row on every read. The tails read last and not
 * yet written are kept here until the job ends, its sandbox is torn down or its machine is
 * found gone; only a crash of the server itself loses them (the row then has older ones).
 */
export class JobTailSaver {
  private readonly jobs = new Map<string, Entry>();

  constructor(private readonly store: Store) {}

  /** A job was just inserted with empty tails. */
  started(row: JobRow): void {
    this.jobs.set(row.id, { sandboxId: row.sandbox_id, savedAt: Date.now(), unsaved: null });
  }

  /** The newest tails known of a job, written or not (what a read without its files falls back on). */
  latest(row: JobRow): TailPatch {
    return this.jobs.get(row.id)?.unsaved ?? row;
  }

  /**
   * Tails just read of `row` (as stored). Written now when the job is no longer running, when
   * `final` (its machine is about to stop), or when the last write is an interval old;
   * otherwise kept. Leaves `row` holding what the store holds.
   */
  async record(row: JobRow, patch: TailPatch, final: boolean): Promise<void> {
    const entry = this.jobs.get(row.id);
    const ended = final || row.status !== "RUNNING";
    if (sameAsRow(patch, row)) {
      if (ended) this.jobs.delete(row.id);
      else if (entry) entry.unsaved = null;
      return;
    }
    const now = Date.now();
    if (!ended && entry && now - entry.savedAt < TAIL_SAVE_INTERVAL_MS) {
      entry.unsaved = patch;
      return;
    }
    if (ended) this.jobs.delete(row.id);
    else this.jobs.set(row.id, { sandboxId: row.sandbox_id, savedAt: now, unsaved: null });
    await this.store.updateJob(row.id, patch);
    Object.assign(row, patch);
  }

  /** Writes a job's unsaved tails (its machine is gone) into the store and `row`, and forgets the job. */
  async flushJob(row: JobRow): Promise<void> {
    const unsaved = this.jobs.get(row.id)?.unsaved;
    this.jobs.delete(row.id);
    if (!unsaved) return;
    await this.store.updateJob(row.id, unsaved);
    Object.assign(row, unsaved);
  }

  /** Writes the unsaved tails of a sandbox's jobs and forgets them (its teardown). */
  async flushSandbox(sandboxId: string): Promise<void> {
    const writes: Array<Promise<void>> = [];
    for (const [id, e] of this.jobs) {
      if (e.sandboxId !== sandboxId) continue;
      this.jobs.delete(id);
      if (e.unsaved) writes.push(this.store.updateJob(id, e.unsaved));
    }
    await Promise.all(writes);
  }
}
