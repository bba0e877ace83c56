import type { HostRow, HostStore } from "../../store/host-store.js";
import { candidateOf } from "./host-view.js";
import type { Candidate } from "./placement.js";

export type CachedHost = Candidate & { secret_hash: string };

/** How old the in-memory view of the hosts may get before placement reads them again. */
const CACHE_MS = 1000;

/**
 * The in-memory view of the hosts placement ranks: read again from the store when older than a
 * second (one read at a time), and updated after each heartbeat, registration or refusal.
 */
export class HostCache {
  private cache = new Map<string, CachedHost>();
  private cacheAt = 0;
  private refreshing: Promise<void> | null = null;

  constructor(private readonly hosts: HostStore) {}

  get(id: string): CachedHost | undefined {
    return this.cache.get(id);
  }

  remember(row: HostRow): CachedHost {
    const c = candidateOf(row);
    this.cache.set(row.id, c);
    return c;
  }

  /**
   * The view with one host read again now (by name), the others as they are: a placement pinned
   * to that host is decided on it alone. Null when the store has no such host.
   */
  async viewWithHost(name: string): Promise<Map<string, CachedHost> | null> {
    // As for a full read now: a read under way may have begun before what changed.
    if (this.refreshing) await this.refreshing.catch(() => {});
    const row = await this.hosts.getHostByName(name);
    if (!row) return null;
    this.remember(row);
    return this.cache;
  }

  /** The hosts, read again when the view is older than `maxAgeMs` (0: read now). */
  async view(maxAgeMs = CACHE_MS): Promise<Map<string, CachedHost>> {
    // A read now must not take one already under way (it may have begun before what changed).
    if (maxAgeMs === 0 && this.refreshing) await this.refreshing.catch(() => {});
    if (maxAgeMs === 0 || Date.now() - this.cacheAt > maxAgeMs) {
      this.refreshing ??= (async () => {
        const rows = await this.hosts.listHosts();
        this.cache = new Map(rows.map((r) => [r.id, candidateOf(r)]));
        this.cacheAt = Date.now();
      })().finally(() => {
        this.refreshing = null;
      });
      await this.refreshing;
    }
    return this.cache;
  }
}
