import type { MeterRecord, MeterRecordWithLabels } from "./sqlite-metering.js";
import type { SandboxPatch } from "./store.js";

export type { MeterKind, MeterRecord, MeterRecordWithLabels } from "./sqlite-metering.js";

/**
 * The store's metering part. Meter records are written by the store itself, in the transaction
 * of each sandbox status change and each checkpoint state or size change, stamped with the
 * clock set here (the metering service's).
 */
export interface MeterStore {
  setMeterClock(now: () => number): void;
  listMeterRecords(q: { teamId?: string; fromMs: number; toMs: number; withLabels?: boolean }): MeterRecordWithLabels[];
  meterRecordsOf(subject: "sandbox" | "checkpoint", ids: readonly string[]): MeterRecord[];
  /** Seeds records as they are (benchmarks, imports). */
  insertMeterRecords(records: ReadonlyArray<Omit<MeterRecord, "id">>): void;
  /** null: no budget. */
  getTeamBudget(teamId: string): number | null;
  setTeamBudget(teamId: string, usd: number | null): void;
  creationsBetween(q: { teamId?: string; fromIso: string; toIso: string }): Array<{ created_at: string; status: string }>;
  countRunning(teamId?: string): number;
  /** Called after every committed status change, with the patch that made it (the metrics). */
  onSandboxStatus(listener: (id: string, patch: SandboxPatch) => void): void;
  /** Sandboxes per status, all teams. */
  countByStatus(): Record<string, number>;
  /** stored_bytes of every DURABLE checkpoint. */
  durableCheckpointBytes(): number;
}
