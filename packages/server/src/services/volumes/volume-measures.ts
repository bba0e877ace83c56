import type { VolumeRow, VolumeStore } from "../../store/volume-rows.js";
import type { VolumeHosts } from "./volume-hosts.js";

/**
 * Volumes' `used_bytes`, measured on the host each lives on (its volumes port walks the tree: an
 * lstat per file): at most once per `ttlMs()` for reads, sharing the walk in flight; `force` (an
 * API write's size check) always walks. A figure that changed is recorded (metered).
 */
export class VolumeMeasures {
  private readonly measuredAt = new Map<string, number>();
  private readonly measuring = new Map<string, Promise<VolumeRow>>();

  constructor(
    private readonly store: VolumeStore,
    private readonly hosts: VolumeHosts,
    private readonly ttlMs: () => number,
  ) {}

  /** The row with its files' bytes: the figure recorded within ttlMs, else a walk's. */
  async measure<R extends VolumeRow>(row: R, force = false): Promise<R> {
    // A lost home's, or one not READY: the figure of its last measure.
    if (row.status !== "READY" || row.home_lost_at) return row;
    const at = this.measuredAt.get(row.id);
    if (!force && at !== undefined && Date.now() - at < this.ttlMs()) return row;
    const running = this.measuring.get(row.id);
    if (running && !force) return { ...row, used_bytes: (await running).used_bytes };
    const walk = (async () => {
      const started = Date.now();
      const port = await this.hosts.find(row.host_id);
      const used = port ? await port.usedBytes(row.id).catch(() => row.used_bytes) : row.used_bytes;
      await this.record(row.id, used, row.used_bytes, started);
      return { ...row, used_bytes: used };
    })();
    this.measuring.set(row.id, walk);
    try {
      return await walk;
    } finally {
      if (this.measuring.get(row.id) === walk) this.measuring.delete(row.id);
    }
  }

  /** A figure known without a walk (what an API write added), as of `at`. */
  async record(id: string, used: number, was?: number, at = Date.now()): Promise<void> {
    if (used !== was) await this.store.setVolumeUsed(id, used);
    this.measuredAt.set(id, at);
  }

  /** A volume deleted: its measure goes. */
  forget(id: string): void {
    this.measuredAt.delete(id);
  }
}
