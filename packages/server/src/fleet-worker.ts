import path from "node:path";
import { type RunWorkerOptions, serveMachineHost } from "@sandtree/host";
import {
  type RegisterHostResponse,
  type SandboxReport,
  type SandboxStatus,
  SandtreeError,
  TERMINAL_STATUSES,
} from "@sandtree/protocol";
import { BlobStoreUrl, makeBlobStore } from "./blob-store-config.js";
import { type RunningServer, startServer } from "./server.js";
import { sha256Hex, workerCallKey } from "./services/fleet/join-token.js";
import { JoinedBlobStore } from "./services/fleet/joined-blob-store.js";
import { ACTIVE } from "./services/sandboxes/sandbox-machines.js";

/** The deepest flatten depth the configuration takes: workers do not flatten (see JoinedBlobStore.replace). */
const FLATTEN_NEVER = 1000;

/** The changes a control plane's record follows: ended, paused, resumed. */
const REPORTED = new Set<SandboxStatus>([...TERMINAL_STATUSES, "PAUSED", "RUNNING"]);

/**
 * runWorker's options (join URL and token, name, data and cache dirs, accelerator, version, log),
 * less what startFleetWorker fills in itself: the URL it registers, the status reports, the
 * registration hook, the layers it reports. `dataDir` holds this worker's own state too: its SQLite,
 * sandbox disks, logs. `blobStore` (the CLI passes $SANDTREE_BLOB_STORE) is only checked at join: the
 * worker stores layers where the control plane says (its bucket, or its own data dir).
 */
export interface FleetWorkerOptions extends Omit<RunWorkerOptions, "url" | "reports" | "inventory" | "onRegistered" | "layers"> {
  /** Where its sandbox API listens (default 127.0.0.1, port 7071). */
  host?: string;
  port?: number;
  /** The URL the control plane calls (default: the listen address; set it behind NAT or 0.0.0.0). */
  advertiseUrl?: string;
  /** The sandbox API's request log (default off: the worker prints its own lines). */
  logger?: boolean;
  /**
   * Also serve this worker's machine host (the MachineHost its sandboxes run on) over the network
   * at this address: the host interface as a Connect-RPC service, for a control plane that drives
   * machines through a RemoteHost (docs/architecture.md, "The remote host"). Same key as the API.
   */
  serveHost?: { host: string; port: number };
}

export interface RunningFleetWorker {
  server: RunningServer;
  joined: RegisterHostResponse;
  /** The URL it registered. */
  url: string;
  /** The control plane it registered with (the first of the join URLs that answered). */
  joinedAt: string;
  /** Where its machine host is served (serveHost), or null. */
  hostUrl: string | null;
  beats(): number;
  /**
   * Stops heartbeating, then the sandbox API and its VMs, then reports the sandboxes it ended to
   * the control plane in one last heartbeat; idempotent.
   */
  close(): Promise<void>;
}

/**
 * `sandtree worker`: the sandbox runtime of `sandtree serve` (its own SQLite, image cache, VMs,
 * network, templates in its data dir) behind its HTTP API, joined to a control plane. It holds
 * no database credentials and no API key: it answers only the key derived from its current host
 * secret and the join token (see workerCallKey), which the control plane computes too.
 */
export async function startFleetWorker(o: FleetWorkerOptions): Promise<RunningFleetWorker> {
  let key: string | null = null;
  // The latest status change of each sandbox not yet reported to the control plane.
  const pending = new Map<string, SandboxReport>();
  const reports = {
    take(): SandboxReport[] {
      const out = [...pending.values()];
      pending.clear();
      return out;
    },
    putBack(r: SandboxReport[]): void {
      for (const x of r) if (!pending.has(x.id)) pending.set(x.id, x);
    },
  };
  let blobs: JoinedBlobStore | null = null;
  let serverClosed = false;
  let joinedStore: string | null = null;
  const server = await startServer(
    {
      ...(o.dataDir ? { dataDir: o.dataDir } : {}),
      ...(o.cacheDir ? { cacheDir: o.cacheDir } : {}),
      ...(o.accel ? { accel: o.accel } : {}),
      host: o.host ?? "127.0.0.1",
      port: o.port ?? 7071,
      logger: o.logger ?? false,
      // A flattened layer gets a new sha256: in a shared bucket, the control plane's record (and
      // every other host's) would no longer match the object. Workers keep their chains as taken.
      flattenDepth: FLATTEN_NEVER,
    },
    {
      makeBlobs: (layersDir) => {
        blobs = new JoinedBlobStore(layersDir);
        return blobs;
      },
      workerKey: () => key,
      onSandboxStatus: (id, patch) => {
        if (patch.status && REPORTED.has(patch.status))
          pending.set(id, {
            id,
            status: patch.status,
            error_reason: patch.error_reason ?? null,
            error_code: patch.error_code ?? null,
          });
      },
    },
  );
  const url = o.advertiseUrl ?? server.url;
  let servedHost: Awaited<ReturnType<typeof serveMachineHost>> | null = null;
  if (o.serveHost) {
    // Set by makeBlobs while the server started (TypeScript does not follow the callback).
    const joined = blobs as JoinedBlobStore | null;
    try {
      // The host the worker's own sandboxes run on, so both ways in see the same machines.
      servedHost = await serveMachineHost({
        host: server.services.sandboxes.bundles.local.host,
        listenHost: o.serveHost.host,
        port: o.serveHost.port,
        key: () => key,
        // Networks opened through it keep their state beside the worker's, never in its server's own files.
        networksDir: path.join(server.dataDir, "host-networks"),
        // Its layers port stores into and fetches from the worker's own blob store (the fleet's).
        ...(joined ? { blobs: joined } : {}),
      });
    } catch (err) {
      await server.close();
      throw err;
    }
  }
  // runWorker's own options, passed on as given (join, dirs, accelerator, vCPUs, version, log, blob store).
  const {
    host: _host,
    port: _port,
    advertiseUrl: _advertiseUrl,
    logger: _logger,
    serveHost: _serveHost,
    ...runWorkerOptions
  } = o;
  // Loaded lazily through the server module, as `serve` loads the host package.
  const { runWorker } = await import("@sandtree/host");
  let joined: Awaited<ReturnType<typeof runWorker>>["joined"];
  let heartbeats: Awaited<ReturnType<typeof runWorker>>["agent"];
  try {
    ({ joined, agent: heartbeats } = await runWorker({
      ...runWorkerOptions,
      url,
      reports,
      layers: async () => server.services.workerCheckpoints?.layers() ?? [],
      inventory: {
        // Once the server closed (its database too) it runs nothing: the last heartbeat's inventory,
        // when it falls due then (every 10th beat, or after a silence), is empty, not a read that fails.
        running: async () => (serverClosed ? [] : (await server.store.listSandboxesByStatus(ACTIVE)).map((s) => s.id)),
        end: async (ids) => {
          for (const id of ids) {
            const sb = await server.store.getSandbox(id);
            if (sb) await server.services.sandboxes.delete(sb.team_id, id);
          }
        },
      },
      onRegistered: (r) => {
        // The control plane's object store, from the first join on (a later join names the same one).
        if (!r.blob_store) blobs?.keepLocal();
        else if (r.blob_store !== joinedStore && blobs) {
          const setting = BlobStoreUrl.parse(r.blob_store);
          blobs.use(makeBlobStore(setting, blobs.localDir));
          joinedStore = r.blob_store;
          o.log?.(`checkpoint layers go to ${r.blob_store}`);
        }
        key = workerCallKey(o.joinToken, r.host_id, sha256Hex(r.secret));
      },
    }));
  } catch (err) {
    await servedHost?.close();
    await server.close();
    if (err instanceof SandtreeError) throw err;
    throw new SandtreeError("UNAVAILABLE", `joining ${o.joinUrls.join(", ")} failed: ${(err as Error).message}`);
  }
  let closing: Promise<void> | null = null;
  return {
    server,
    joined,
    url,
    joinedAt: heartbeats.joinUrl,
    hostUrl: servedHost?.url ?? null,
    beats: () => heartbeats.beats,
    close() {
      closing ??= (async () => {
        await heartbeats.stop().catch(() => {});
        await servedHost?.close();
        // Ends its sandboxes (TERMINATED "the server shut down"), which queues their reports...
        await server.close();
        serverClosed = true;
        // ...sent in a last heartbeat, so the control plane ends its rows now, not at HOST_LOST.
        await heartbeats.beat().catch((err: Error) => o.log?.(`last report failed: ${err.message}`));
      })();
      return closing;
    },
  };
}
