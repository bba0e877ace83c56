import type { VolumeState } from "@sandtree/protocol";

/**
 * The volume tables (issue #36): `volumes`, one row per volume a team made (its files are a
 * directory on the host, see services/volumes), and `volume_mounts`, which sandbox mounts which
 * volume at which guest path. A mount counts while its sandbox has not ended, so a volume is
 * deleted only when no running (or starting, or paused) sandbox has it.
 */
export interface VolumeRow {
  id: string;
  team_id: string;
  name: string;
  status: VolumeState;
  size_gb: number;
  labels: Record<string, string>;
  used_bytes: number;
  created_at: string;
  updated_at: string;
  /**
   * The fleet host whose disk holds its files (null: the control plane's own host, where every
   * volume is made); while MOVING, `move_to` is the host it goes to.
   */
  host_id: string | null;
  move_to: string | null;
  /** Its last copy in the object store (fleet, home a worker): when taken, its size, its key and sha256 (volume-sync-rows.ts). */
  synced_at: string | null;
  synced_bytes: number | null;
  sync_key: string | null;
  sync_sha256: string | null;
  /** Its home host was lost then and it was not brought back yet. */
  home_lost_at: string | null;
  /** Brought back from its copy of this time after its host was lost. */
  restored_as_of: string | null;
}

/** A new volume's home and copies: on the control plane's own host, never synced. */
export const MADE_HERE = {
  host_id: null,
  move_to: null,
  synced_at: null,
  synced_bytes: null,
  sync_key: null,
  sync_sha256: null,
  home_lost_at: null,
  restored_as_of: null,
} as const;

export interface VolumeMountRow {
  sandbox_id: string;
  volume_id: string;
  path: string;
  read_only: boolean;
}

/** A team's volumes that are not DELETED: how many, and their size_gb summed. */
export interface VolumeUsage {
  count: number;
  size_gb: number;
}

export interface VolumeStore {
  /**
   * Inserts the volume (CREATING) after `check` accepted the team's current usage, in one
   * transaction (concurrent creates never overshoot a quota). Answers false when the team has a
   * volume of that name already (not DELETED).
   */
  createVolume(row: VolumeRow, check: (usage: VolumeUsage) => void): Promise<boolean>;
  /** By id or name, within the team (any team without one); DELETED volumes are not found. */
  getVolume(ref: string, teamId?: string): Promise<VolumeRow | undefined>;
  listVolumes(filter: { teamId?: string; states?: readonly VolumeState[] }): Promise<VolumeRow[]>;
  /** Applies the state when the current one is among `from`; true when applied. Metered in the same transaction. */
  setVolumeState(id: string, status: VolumeState, from: readonly VolumeState[]): Promise<boolean>;
  /** Records a new measure of its files (metered in the same transaction). */
  setVolumeUsed(id: string, bytes: number): Promise<void>;
  volumeUsage(teamId: string): Promise<VolumeUsage>;
  /**
   * Records the sandbox's mounts, each volume READY at that moment (the volume's row locked):
   * false, and nothing recorded, when one is not.
   */
  attachVolumes(sandboxId: string, mounts: readonly VolumeMountRow[]): Promise<boolean>;
  mountsOf(sandboxId: string): Promise<VolumeMountRow[]>;
  /** The mounts of these sandboxes with each volume's name (one query, for answers that list sandboxes). */
  mountsOfSandboxes(sandboxIds: readonly string[]): Promise<Array<VolumeMountRow & { name: string }>>;
  /** Sandboxes not ended that mount the volume. */
  mountersOf(volumeId: string): Promise<string[]>;
  /**
   * READY (or DELETING again) to DELETING unless a sandbox not ended mounts it, atomically with
   * attachVolumes: answers the sandboxes that mount it (empty: the state changed).
   */
  beginDeleteVolume(id: string): Promise<{ changed: boolean; mounters: string[] }>;
  /**
   * READY to MOVING towards host `to` unless a sandbox not ended mounts it, atomically with
   * attachVolumes (answers them: empty, and changed, when it moved to MOVING). A move already
   * under way to `to` answers changed too (resumed); one to another host does not.
   */
  beginMoveVolume(id: string, to: string): Promise<{ changed: boolean; mounters: string[] }>;
  /** MOVING to READY, its files now on host `home` (the target when done, its old home when given up). */
  endMoveVolume(id: string, home: string | null): Promise<boolean>;
}

const ENDED = "('TERMINATED', 'ERROR', 'TIMEOUT')";

/** A volumes row as both databases return it: labels as their JSON text. */
export type VolumeRaw = Omit<VolumeRow, "labels"> & { labels: string };
export const volumeFromRaw = (r: VolumeRaw): VolumeRow => ({ ...r, labels: JSON.parse(r.labels) });

/** Sandboxes not ended that mount volume `?`/$1 (the same SQL for both backends but the placeholder). */
export const mountersSql = (ph: string) =>
  `SELECT m.sandbox_id FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id
   WHERE m.volume_id = ${ph} AND s.status NOT IN ${ENDED} ORDER BY m.sandbox_id`;

export const VOLUMES_MIGRATION = `
  CREATE TABLE volumes (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), name TEXT NOT NULL,
    status TEXT NOT NULL, size_gb INTEGER NOT NULL, labels TEXT NOT NULL, used_bytes INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
  CREATE UNIQUE INDEX volumes_team_name ON volumes(team_id, name) WHERE status <> 'DELETED';
  CREATE TABLE volume_mounts (sandbox_id TEXT NOT NULL, volume_id TEXT NOT NULL, path TEXT NOT NULL,
    read_only INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (sandbox_id, path));
  CREATE INDEX volume_mounts_volume ON volume_mounts(volume_id);`;

export const PG_VOLUMES_MIGRATION = `
  CREATE TABLE volumes (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), name TEXT COLLATE "C" NOT NULL,
    status TEXT NOT NULL, size_gb INTEGER NOT NULL, labels TEXT NOT NULL, used_bytes BIGINT NOT NULL DEFAULT 0,
    created_at TEXT COLLATE "C" NOT NULL, updated_at TEXT NOT NULL);
  CREATE UNIQUE INDEX volumes_team_name ON volumes(team_id, name) WHERE status <> 'DELETED';
  CREATE TABLE volume_mounts (sandbox_id TEXT NOT NULL, volume_id TEXT NOT NULL, path TEXT NOT NULL,
    read_only BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (sandbox_id, path));
  CREATE INDEX volume_mounts_volume ON volume_mounts(volume_id);`;

/** A volume's home host and the host a move takes it to (both backends). */
export const VOLUME_HOMES_MIGRATION = "ALTER TABLE volumes ADD COLUMN host_id TEXT; ALTER TABLE volumes ADD COLUMN move_to TEXT;";

/**
 * A volume's copy in the object store (its last sync) and what a lost home left: the volume's
 * fields above, and the hosts that still hold a copy superseded by a restore elsewhere (dropped
 * when such a host comes back). Both backends.
 */
export const VOLUME_SYNCS_MIGRATION = `
  ALTER TABLE volumes ADD COLUMN synced_at TEXT; ALTER TABLE volumes ADD COLUMN synced_bytes BIGINT;
  ALTER TABLE volumes ADD COLUMN sync_key TEXT; ALTER TABLE volumes ADD COLUMN sync_sha256 TEXT;
  ALTER TABLE volumes ADD COLUMN home_lost_at TEXT; ALTER TABLE volumes ADD COLUMN restored_as_of TEXT;
  CREATE TABLE volume_stale_copies (volume_id TEXT NOT NULL, host_id TEXT NOT NULL, PRIMARY KEY (volume_id, host_id));`;

/** Every state but DELETED: what lists show by default. */
export const LIVE_VOLUME_STATES: readonly VolumeState[] = ["CREATING", "READY", "MOVING", "DELETING"];

/** A volume's meter record while it exists: its measured bytes, billed per GiB-hour (meter-rules). */
function volumeMeterRecord(v: Pick<VolumeRow, "id" | "team_id" | "used_bytes">, nowMs: number) {
  return {
    kind: "volume" as const,
    subject_id: v.id,
    sandbox_id: "",
    team_id: v.team_id,
    state: "READY",
    vcpus: 0,
    memory_gib: 0,
    disk_gib: 0,
    stored_bytes: v.used_bytes,
    start_ms: nowMs,
    end_ms: null,
  };
}

/** Whether a volume in this state is billed (from created until its delete begins). */
function volumeBilled(status: VolumeState | undefined): boolean {
  return status === "CREATING" || status === "READY" || status === "MOVING";
}

/** What a change of volume `?`/$1 is metered from: the volume (gone: undefined) and its open meter record. */
export const volumeMeterSql = (ph: string) => ({
  volume: `SELECT id, team_id, status, used_bytes FROM volumes WHERE id = ${ph}`,
  open: `SELECT id, stored_bytes, start_ms FROM meter_records WHERE subject_id = ${ph} AND kind = 'volume' AND end_ms IS NULL`,
});

/** The rows volumeMeterSql reads. */
export interface VolumeMeterRead {
  volume: Pick<VolumeRow, "id" | "team_id" | "status" | "used_bytes"> | undefined;
  open: { id: number; stored_bytes: number; start_ms: number } | undefined;
}

/**
 * What a change of a volume does to its meter records, both backends: the open record is closed
 * (`close`, never before it started) unless it still holds, and the next one opened (`next`) while
 * the volume is billed.
 */
export function volumeMeterChange(
  { volume: v, open }: VolumeMeterRead,
  nowMs: number,
): { close?: { id: number; endMs: number }; next?: ReturnType<typeof volumeMeterRecord> } {
  const billed = v !== undefined && volumeBilled(v.status);
  if (open && billed && open.stored_bytes === v.used_bytes) return {};
  return {
    ...(open ? { close: { id: open.id, endMs: Math.max(nowMs, open.start_ms) } } : {}),
    ...(billed ? { next: volumeMeterRecord(v, nowMs) } : {}),
  };
}
