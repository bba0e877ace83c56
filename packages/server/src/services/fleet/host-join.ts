import { randomBytes, randomUUID } from "node:crypto";
import { type RegisterHostRequest, type RegisterHostResponse, SandtreeError } from "@sandtree/protocol";
import type { z } from "zod";
import { blobStoreForWorker } from "./blob-store-join.js";
import type { FleetServiceDeps } from "./fleet-deps.js";
import type { HostCache } from "./host-cache.js";
import { isLocalHostName, LOCAL_HOST } from "./host-names.js";
import { bearer, sameSecret, sha256Hex } from "./join-token.js";

/** `POST /v1/fleet/hosts/register`: the join token buys a host id and a per-host secret, shown once. */
export async function registerWorker(
  deps: FleetServiceDeps,
  cache: HostCache,
  joinToken: string,
  authorization: string | undefined,
  req: z.output<typeof RegisterHostRequest>,
): Promise<RegisterHostResponse> {
  const token = bearer(authorization);
  if (!token || !sameSecret(token, joinToken)) {
    throw new SandtreeError(
      "UNAUTHORIZED",
      "invalid join token: use the one the control plane printed (in <data-dir>/join-token)",
    );
  }
  if (isLocalHostName(req.name))
    throw new SandtreeError(
      "ALREADY_EXISTS",
      `the host name ${req.name} is reserved (${LOCAL_HOST} and ${LOCAL_HOST}-* are control planes' own)`,
    );
  const blobStore = blobStoreForWorker(deps.blobStore, req.blob_store);
  const secret = `sth_${randomBytes(32).toString("base64url")}`;
  const row = await deps.hosts.registerHost({
    id: `host_${randomUUID().replaceAll("-", "").slice(0, 16)}`,
    name: req.name,
    capacity: req.capacity,
    locality: req.locality,
    secret_hash: sha256Hex(secret),
    at: new Date(deps.clock.now()).toISOString(),
  });
  // Where the control plane reaches it: its machine host (a worker), or an older worker's sandbox API.
  await deps.urls?.set(row.id, req.url ?? req.host_url ?? null, req.host_url ?? null);
  cache.remember(row);
  deps.log.info(
    { host: row.name, host_id: row.id, capacity: row.capacity, url: req.url, host_url: req.host_url },
    "host registered",
  );
  return {
    host_id: row.id,
    name: row.name,
    secret,
    heartbeat_interval_ms: deps.heartbeatIntervalMs,
    blob_store: blobStore,
  };
}
