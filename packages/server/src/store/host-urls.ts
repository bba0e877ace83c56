/**
 * Where the control plane reaches each worker's sandbox API: table `host_urls` (its own, beside
 * the host registry; SQLite: sqlite-host-urls.ts, PostgreSQL: pg-host-urls.ts). A host without a
 * row runs no sandboxes for the control plane (its own host, or a worker registered without `url`).
 */
export interface HostUrls {
  set(hostId: string, url: string | null): Promise<void>;
  get(hostId: string): Promise<string | null>;
  all(): Promise<Map<string, string>>;
}
