import { SandtreeError } from "@sandtree/protocol";
import type { FleetService } from "./fleet-service.js";

/**
 * Sets `host` on each sandbox: the name of the fleet host it is placed on (`local` for the
 * server's own), or null when it has no placement (it ended, or is not placed yet). One query for
 * the placements. For admin keys only: the routes decide who sees it.
 */
export async function withHosts<T extends { id: string; host?: string | null | undefined }>(
  fleet: FleetService,
  sandboxes: T[],
): Promise<T[]> {
  if (sandboxes.length === 0) return sandboxes;
  const where = new Map((await fleet.whereabouts(sandboxes.map((s) => s.id))).map((w) => [w.sandbox_id, w.host_id]));
  const names = new Map<string, string>();
  for (const s of sandboxes) {
    const hostId = where.get(s.id) ?? null;
    if (hostId !== null && !names.has(hostId)) names.set(hostId, await fleet.hostName(hostId));
    s.host = hostId === null ? null : (names.get(hostId) ?? null);
  }
  return sandboxes;
}

/** The id of the host named `name` (a list filter), or 404 HOST_NOT_FOUND. */
export async function hostIdNamed(fleet: FleetService, name: string): Promise<string> {
  const host = await fleet.hostNamed(name);
  if (!host) throw new SandtreeError("HOST_NOT_FOUND", `no host named ${name}: see \`sandtree host list\``, { host: name });
  return host.id;
}
