import type { VolumeStore } from "../../store/volume-rows.js";
import type { SyncCandidate, VolumeSyncStore } from "../../store/volume-sync-rows.js";
import type { Logger } from "../observability/logger.js";
import type { VolumeHosts } from "../volumes/volume-hosts.js";
import type { FleetEvents } from "./fleet-events.js";
import type { FleetService } from "./fleet-service.js";
import type { VolumeMoves } from "./volume-moves.js";

export interface VolumeSyncsDeps {
  store: VolumeStore;
  syncs: VolumeSyncStore;
  moves: VolumeMoves;
  /** Each host's volumes port (through its bundle): a returning host's stale copy is removed there. */
  hosts: VolumeHosts;
  fleet: FleetService;
  /** Subscribed to: a lost host's volumes are marked once its sandboxes ended (they no longer mount them). */
  events: FleetEvents;
  log: Logger;
  /** How often a volume that sandboxes mount is copied (SANDTREE_VOLUME_SYNC_S, in ms). */
  intervalMs: number;
}

/** The loop looks at volumes at least this often (a volume's last sandbox ended is copied then). */
const MAX_TICK_MS = 10_000;

/**
 * Keeps a copy of each volume whose home is a worker in the fleet's object store, so a lost
 * worker's volumes come back elsewhere (docs/fleet.md, "Volumes on workers"): every `intervalMs`
 * while sandboxes mount it (a snapshot taken while frozen), and once after the last one ended.
 * The same loop records what lost homes leave: a volume whose host is lost is marked (hostLost);
 * one whose host came back before it was restored elsewhere is that host's again (its copy is
 * the newest); a copy a restore elsewhere superseded is dropped from its host when that host comes
 * back, never served. Without an object store it only keeps that record (nothing is synced).
 */
export class VolumeSyncs {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly deps: VolumeSyncsDeps) {
    deps.events.on("lost", "volumes", (lost) => this.hostLost(lost.host.id, new Date().toISOString()));
  }

  start(): void {
    if (this.timer) return;
    const every = Math.min(this.deps.intervalMs, MAX_TICK_MS);
    this.timer = setInterval(() => void this.tick(), every);
    this.timer.unref();
  }

  /** Stops the loop; a pack or unpack in flight is aborted (a move gives up, resumed at the next start). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.deps.moves.abortCalls();
    await this.running;
  }

  /** HOST_LOST: the volumes whose home it was are marked; each is restored at its next use (or VOLUME_LOST). */
  async hostLost(hostId: string, at: string): Promise<void> {
    this.deps.moves.hostLost(hostId);
    const rows = await this.deps.syncs.markHomeLost(hostId, at);
    for (const v of rows) {
      this.deps.log.warn(
        { volume: v.id, host: hostId, synced_at: v.synced_at },
        v.sync_key ? "volume's host lost: restorable from its synced copy" : "volume's host lost: no synced copy (VOLUME_LOST)",
      );
    }
  }

  /** One pass (one at a time): lost homes that came back, stale copies, then the syncs due. */
  tick(): Promise<void> {
    this.running ??= this.pass()
      .catch((err: Error) => this.deps.log.warn({ err: err.message }, "volume sync pass failed"))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  private async pass(): Promise<void> {
    await this.homesBack();
    await this.dropStale();
    if (!this.deps.moves.canMove()) return;
    const now = Date.now();
    for (const c of await this.deps.syncs.syncCandidates()) {
      if (!this.due(c, now) || !c.host_id) continue;
      const t0 = Date.now();
      try {
        const at = await this.deps.moves.sync(c.id, c.host_id, c.mounted);
        if (at) this.deps.log.info({ volume: c.id, mounted: c.mounted, ms: Date.now() - t0 }, "volume synced");
      } catch (err) {
        this.deps.log.warn({ volume: c.id, err: (err as Error).message }, "could not sync a volume");
      }
    }
  }

  /** Mounted: its copy is older than the interval. Not mounted: it has none, or a sandbox ended after it was taken. */
  private due(c: SyncCandidate, now: number): boolean {
    if (!c.synced_at) return true;
    if (c.mounted) return now - Date.parse(c.synced_at) >= this.deps.intervalMs;
    return c.last_unmount_at !== null && c.last_unmount_at > c.synced_at;
  }

  private async homesBack(): Promise<void> {
    for (const v of await this.deps.syncs.homeLost()) {
      if (v.status !== "READY" || !v.host_id || (await this.deps.fleet.hostState(v.host_id)) === "LOST") continue;
      if (await this.deps.syncs.clearHomeLost(v.id, v.host_id))
        this.deps.log.info(
          { volume: v.id, host: v.host_id },
          "volume's host is back before it was restored: its copy there holds",
        );
    }
  }

  private async dropStale(): Promise<void> {
    for (const s of await this.deps.syncs.staleCopies()) {
      const v = await this.deps.store.getVolume(s.volume_id);
      // Its home again meanwhile (moved back there): that copy is the volume's, not stale.
      if (v && v.status !== "DELETED" && (v.host_id === s.host_id || v.move_to === s.host_id)) {
        await this.deps.syncs.forgetStaleCopy(s.volume_id, s.host_id);
        continue;
      }
      try {
        const port = await this.deps.hosts.find(s.host_id);
        // A host that serves its machine host but whose bundle is not open yet (it just came back): the next pass.
        if (!port && (await this.deps.fleet.workerHostUrls()).has(s.host_id)) continue;
        await port?.remove(s.volume_id);
        await this.deps.syncs.forgetStaleCopy(s.volume_id, s.host_id);
        this.deps.log.info({ volume: s.volume_id, host: s.host_id }, "a returning host's stale copy of a volume dropped");
      } catch (err) {
        this.deps.log.warn(
          { volume: s.volume_id, host: s.host_id, err: (err as Error).message },
          "could not drop a stale volume copy",
        );
      }
    }
  }
}
