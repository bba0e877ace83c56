/**
 * Where each worker is: the URL it advertises (`url`, listed by `GET /v1/hosts`) and its machine host
 * (`host_url`, the host interface the control plane runs the worker's sandboxes through). Table
 * `host_urls` (its own, beside the host registry; SQLite: sqlite-host-urls.ts, PostgreSQL:
 * pg-host-urls.ts). A host without a row runs no sandboxes for the control plane (its own host, or
 * a worker registered without `url`).
 */
export interface HostUrls {
  /** A worker's addresses as it registered them (`url` null: it runs nothing, the row goes). */
  set(hostId: string, url: string | null, hostUrl?: string | null): Promise<void>;
  get(hostId: string): Promise<string | null>;
  /** Host id -> the URL it advertises. */
  all(): Promise<Map<string, string>>;
  /** Host id -> machine host URL, of the workers that registered one. */
  hostUrls(): Promise<Map<string, string>>;
}
