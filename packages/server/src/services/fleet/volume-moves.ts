import { randomBytes } from "node:crypto";
import type { BlobStore } from "@sandtree/host";
import { type PackedVolume, SandtreeError } from "@sandtree/protocol";
import type { VolumeRow, VolumeStore } from "../../store/volume-rows.js";
import type { VolumeSyncStore } from "../../store/volume-sync-rows.js";
import type { Logger } from "../observability/logger.js";
import { KeyedSerial } from "../support/keyed-serial.js";
import type { VolumeHosts } from "../volumes/volume-hosts.js";
import { volumeRow } from "../volumes/volume-service.js";
import type { VolumesAway } from "../volumes/volumes-away.js";
import type { FleetService } from "./fleet-service.js";

export interface VolumeMovesDeps {
  store: VolumeStore;
  /** Each volume's copy in the object store, and the homes lost (volume-syncs.ts). */
  syncs: VolumeSyncStore;
  /** Each host's volumes port (through its bundle): the old home packs, the new one unpacks. */
  hosts: VolumeHosts;
  fleet: FleetService;
  /** This control plane's blob store: the fleet's object store when it has one. */
  blobs: BlobStore;
  log: Logger;
}

/** How long a host may take to pack or unpack a volume (its whole tree through the object store). */
const MOVE_CALL_MS = 30 * 60_000;

/**
 * Volumes of a fleet, each on one host's disk (its home: `host_id`, null for this control plane's
 * own host). A create placed on another host moves its volumes there through the object store
 * when no sandbox mounts them: READY -> MOVING (the target recorded, atomically with the mount
 * check) -> packed on the old home -> unpacked on the new one -> READY there -> the old copy
 * dropped, each step on the volumes port of the host it runs on (`archives(blobs)`: store on the
 * old home, fetch on the new one; remove). Every step can be done again, so a move a crash
 * interrupted is finished at the next start (resume) by packing again: the old home keeps its
 * copy until the move is recorded.
 *
 * A volume whose home was lost (home_lost_at) is brought back by the same machine, its source the
 * copy its last sync left in the object store rather than the old home: MOVING -> unpacked on the
 * new home -> READY there (restored_as_of, the lost host's copy recorded as stale), one without a
 * copy being VOLUME_LOST. A move to a worker keeps its archive as the volume's copy (a sync).
 */
export class VolumeMoves implements VolumesAway {
  /** One move per volume at a time in this process (the store's MOVING state holds it across processes). */
  private readonly serial = new KeyedSerial();
  /** Calls in flight to each host, aborted when it is lost: a hung host must not hold its volumes' restore. */
  private readonly calls = new Map<string, AbortController>();

  constructor(private readonly deps: VolumeMovesDeps) {}

  /** A volume of the team by id or name (404 otherwise). */
  row(teamId: string, ref: string): Promise<VolumeRow> {
    return volumeRow(this.deps.store, teamId, ref);
  }

  /** Whether volumes can move at all: only through an object store every host shares. */
  canMove(): boolean {
    return this.deps.fleet.sharesLayers();
  }

  /** Whether machines on host `hostId` may mount volumes (that host's own answer). */
  async mountsOn(hostId: string): Promise<boolean> {
    return (await this.deps.hosts.mounts(hostId)).ok;
  }

  /** The host whose disk holds the volume (the local host's id for null). */
  homeOf(row: Pick<VolumeRow, "host_id">): string | null {
    return row.host_id ?? this.deps.fleet.localHostId;
  }

  /**
   * The volume on host `to` (READY there), moved if it lives elsewhere. Refused while a sandbox
   * mounts it (VOLUME_IN_USE_ELSEWHERE), without an object store (VOLUME_NOT_ON_HOST), or while
   * another move takes it elsewhere (CONFLICT).
   */
  async moveTo(given: VolumeRow, to: string): Promise<VolumeRow> {
    const { store, fleet } = this.deps;
    const row = await this.homeBack(given);
    if (row.status === "READY" && this.homeOf(row) === to && !row.home_lost_at) return row;
    const from = this.homeOf(row);
    const fromName = from ? await fleet.hostName(from).catch(() => from) : "this host";
    const toName = await fleet.hostName(to).catch(() => to);
    if (row.home_lost_at && !row.sync_key) throw volumeLost(row, fromName);
    if (!this.canMove()) {
      throw new SandtreeError(
        "VOLUME_NOT_ON_HOST",
        `volume ${row.name} lives on host ${fromName}, not ${toName}, and without an object store volumes do not move: omit host`,
        { field: "host", volume: row.id, host: fromName },
      );
    }
    const { changed, mounters } = await store.beginMoveVolume(row.id, to);
    if (mounters.length > 0) {
      throw new SandtreeError(
        "VOLUME_IN_USE_ELSEWHERE",
        `volume ${row.name} lives on host ${fromName} and is mounted there by ${mounters.join(", ")}: a volume moves to host ${toName} only when no sandbox mounts it (place the sandbox on ${fromName}, or delete those first)`,
        { volume: row.id, host: fromName, sandboxes: mounters },
      );
    }
    if (!changed) {
      const now = await store.getVolume(row.id);
      if (now?.status === "READY" && this.homeOf(now) === to) return now;
      throw new SandtreeError("CONFLICT", `volume ${row.name} is ${now?.status ?? "DELETED"}: try again`, { volume: row.id });
    }
    return this.drive(row.id, to);
  }

  /** Moves the control plane finds under way at its start (a crash interrupted them) are finished. */
  async resume(): Promise<void> {
    for (const row of await this.deps.store.listVolumes({ states: ["MOVING"] })) {
      if (!row.move_to) continue;
      await this.drive(row.id, row.move_to).catch((err: Error) => {
        this.deps.log.warn({ volume: row.id, err: err.message }, "could not finish a volume's move");
      });
    }
  }

  /** The file API on a volume that lives on another host: it moves to this control plane's own host first. */
  async bringHome(row: VolumeRow): Promise<VolumeRow> {
    const here = this.deps.fleet.localHostId;
    if (!here) throw new SandtreeError("UNAVAILABLE", "this control plane's own host is not registered yet");
    return this.moveTo(row, here);
  }

  /**
   * A volume being deleted: a lost home's copy is recorded, to be dropped when that host comes back
   * (VolumeSyncs), and its copy in the object store goes. Its home's copy is the service's to remove.
   */
  async dropAway(row: VolumeRow): Promise<void> {
    if (row.host_id && row.home_lost_at) await this.deps.syncs.recordStaleCopy(row.id, row.host_id);
    if (row.sync_key) await this.deps.blobs.delete(row.sync_key);
  }

  /**
   * Copies the volume (READY on worker `home`) to the object store as its new synced copy: from a
   * snapshot taken while frozen when sandboxes mount it, else from its tree. One at a time with
   * its moves; a volume that moved or whose home was lost meanwhile is left. Answers the copy's time.
   */
  sync(id: string, home: string, snapshot: boolean): Promise<string | null> {
    return this.serial.run(id, async () => {
      const row = await this.deps.store.getVolume(id);
      if (row?.status !== "READY" || row.host_id !== home || row.home_lost_at) return null;
      const at = new Date().toISOString();
      const packed = await this.pack(home, id, syncKey(id), { snapshot, sizeGb: row.size_gb });
      await this.recordSync(id, packed, at);
      return at;
    });
  }

  private async recordSync(id: string, packed: PackedVolume, at: string): Promise<void> {
    const sync = { key: packed.key, sha256: packed.sha256, bytes: packed.size, at };
    const stale = await this.deps.syncs.recordSync(id, sync);
    if (stale) await this.deps.blobs.delete(stale).catch(() => {});
  }

  private drive(id: string, to: string): Promise<VolumeRow> {
    return this.serial.run(id, async () => {
      const { store, log } = this.deps;
      const row = await store.getVolume(id);
      if (row?.status !== "MOVING" || row.move_to !== to) {
        if (row?.status === "READY" && this.homeOf(row) === to) return row;
        throw new SandtreeError("CONFLICT", `volume ${id} is no longer moving to this host: try again`, { volume: id });
      }
      if ((await this.homeBack(row)).home_lost_at && row.host_id) return this.restore(row, row.host_id, to);
      const from = this.homeOf(row);
      const key = syncKey(id);
      const at = new Date().toISOString();
      let packed: PackedVolume;
      try {
        packed = await this.pack(from, id, key);
        await this.unpack(to, row, packed);
      } catch (err) {
        // Given up: the old home still holds the files; the new one's partial copy goes.
        await this.drop(to, id).catch(() => {});
        await this.deps.blobs.delete(key).catch(() => {});
        await store.endMoveVolume(id, row.host_id);
        throw err;
      }
      const home = this.deps.fleet.isLocal(to) ? null : to;
      await store.endMoveVolume(id, home);
      log.info({ volume: id, to }, "volume moved");
      await this.drop(from, id).catch((err: Error) =>
        log.warn({ volume: id, err: err.message }, "could not drop a moved volume's old copy"),
      );
      // On a worker the archive is the volume's copy as of now (nothing mounted it meanwhile); else it goes.
      if (home) await this.recordSync(id, packed, at).catch(() => {});
      else await this.deps.blobs.delete(key).catch(() => {});
      return (await store.getVolume(id)) ?? { ...row, status: "READY", host_id: home, move_to: null };
    });
  }

  /**
   * A volume whose lost home is back (before the sync loop noticed): that home's copy is the newest,
   * so it is the volume's again rather than restored over from an older sync.
   */
  private async homeBack(row: VolumeRow): Promise<VolumeRow> {
    if (!row.home_lost_at || !row.host_id || (await this.deps.fleet.hostState(row.host_id)) === "LOST") return row;
    await this.deps.syncs.clearHomeLost(row.id, row.host_id);
    return { ...row, home_lost_at: null };
  }

  /** The volume's last synced copy unpacked on `to` (MOVING there), its lost home's copy now stale. */
  private async restore(row: VolumeRow, lost: string, to: string): Promise<VolumeRow> {
    const { store, syncs, log } = this.deps;
    const lostName = await this.deps.fleet.hostName(lost).catch(() => lost);
    if (!row.sync_key || !row.sync_sha256 || row.synced_bytes === null) {
      await store.endMoveVolume(row.id, row.host_id);
      throw volumeLost(row, lostName);
    }
    try {
      await this.unpack(to, row, { key: row.sync_key, sha256: row.sync_sha256, size: row.synced_bytes });
    } catch (err) {
      await this.drop(to, row.id).catch(() => {});
      await store.endMoveVolume(row.id, row.host_id);
      throw err;
    }
    const home = this.deps.fleet.isLocal(to) ? null : to;
    await syncs.endRestore(row.id, home, lost);
    log.warn({ volume: row.id, lost_host: lostName, to, as_of: row.synced_at }, "volume restored from its synced copy");
    return { ...row, status: "READY", host_id: home, move_to: null, home_lost_at: null, restored_as_of: row.synced_at };
  }

  /** A host was declared lost: the packs and unpacks in flight to it give up now. */
  hostLost(hostId: string): void {
    this.abort(hostId, `host ${hostId} was lost`);
  }

  /** At shutdown: every pack and unpack in flight gives up. */
  abortCalls(): void {
    for (const id of [...this.calls.keys()]) this.abort(id, "the control plane is stopping");
  }

  private abort(hostId: string, why: string): void {
    this.calls.get(hostId)?.abort(new SandtreeError("HOST_LOST", why));
    this.calls.delete(hostId);
  }

  private signalFor(hostId: string): AbortSignal {
    let c = this.calls.get(hostId);
    if (!c) this.calls.set(hostId, (c = new AbortController()));
    return c.signal;
  }

  /** A call's signal on host `hostId`: aborted when that host is lost or this process stops, or past MOVE_CALL_MS. */
  private callOn(hostId: string | null): { signal: AbortSignal } {
    return { signal: AbortSignal.any([this.signalFor(hostId ?? ""), AbortSignal.timeout(MOVE_CALL_MS)]) };
  }

  /** The volume packed into the object store by the host that holds it (a sync: from a snapshot while mounted). */
  private async pack(
    from: string | null,
    id: string,
    key: string,
    o: { snapshot?: boolean; sizeGb?: number } = {},
  ): Promise<PackedVolume> {
    const port = await this.deps.hosts.of(from);
    return port.archives(this.deps.blobs).store(id, key, { ...o, ...this.callOn(from) });
  }

  /** The archive unpacked as the volume on host `to` (made there at its size when it is not). */
  private async unpack(to: string, row: VolumeRow, archive: PackedVolume): Promise<void> {
    const port = await this.deps.hosts.of(to);
    await port.archives(this.deps.blobs).fetch(archive, row.id, row.size_gb, this.callOn(to));
  }

  /** Host `hostId`'s copy of the volume removed (idempotent). */
  private async drop(hostId: string | null, id: string): Promise<void> {
    await (await this.deps.hosts.of(hostId)).remove(id, this.callOn(hostId));
  }
}

/** A new key for a volume's archive in the object store (a move's or a sync's: each its own). */
function syncKey(id: string): string {
  return `volume-${id}-${randomBytes(4).toString("hex")}.tar`;
}

function volumeLost(row: VolumeRow, hostName: string): SandtreeError {
  return new SandtreeError(
    "VOLUME_LOST",
    `volume ${row.name} lived on host ${hostName}, lost at ${row.home_lost_at}, and no copy of it reached the object store: its files are gone unless that host comes back (delete the volume)`,
    { volume: row.id, host: hostName },
  );
}
