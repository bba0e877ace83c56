import type { HostStore } from "../../store/host-store.js";

/** The name of the control plane's own host (single-box mode's local worker). */
export const LOCAL_HOST = "local";

/** `local` and `local-*` are control planes' own hosts: no worker may take such a name. */
export function isLocalHostName(name: string): boolean {
  return name === LOCAL_HOST || name.startsWith(`${LOCAL_HOST}-`);
}

/** The sandboxes placed on control planes' own hosts other than the one named `ownName`. */
export async function placedOnPeers(hosts: HostStore, ownName: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const h of await hosts.listHosts()) {
    if (!isLocalHostName(h.name) || h.name === ownName) continue;
    for (const p of await hosts.listPlacements(h.id)) ids.add(p.sandbox_id);
  }
  return ids;
}
