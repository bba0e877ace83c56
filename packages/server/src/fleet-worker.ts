import { mkdirSync } from "node:fs";
import path from "node:path";
import { detectAccel, type RunWorkerOptions, serveMachineHost, setKvmCpuModel, VolumeImages } from "@sandtree/host";
import { type RegisterHostResponse, SandtreeError } from "@sandtree/protocol";
import { BlobStoreUrl, makeBlobStore } from "./blob-store-config.js";
import { loadConfig, workerEnv } from "./config.js";
import { defaultHost, defaultHostNetworks, serverJail } from "./default-host.js";
import { closeDataDir } from "./jail-setup.js";
import { sha256Hex, workerCallKey } from "./services/fleet/join-token.js";
import { JoinedBlobStore } from "./services/fleet/joined-blob-store.js";
import type { Logger } from "./services/observability/logger.js";

/**
 * runWorker's options (join URL and token, name, data and cache dirs, accelerator, version, log),
 * less what startFleetWorker fills in itself: the URL it registers, the registration hook, the
 * layers it reports. `dataDir` holds this worker's machines' disks, layers, logs and network state.
 * `blobStore` (the CLI passes $SANDTREE_BLOB_STORE) is only checked at join: the worker stores
 * layers where the control plane says (its bucket, or its own data dir).
 */
export interface FleetWorkerOptions extends Omit<RunWorkerOptions, "url" | "hostUrl" | "onRegistered" | "layers"> {
  /** Where it listens (default 127.0.0.1, port 7071); its machine host is served there unless `serveHost` says. */
  host?: string;
  port?: number;
  /** The URL the control plane calls (default: the listen address; set it behind NAT or 0.0.0.0). */
  advertiseUrl?: string;
  /**
   * Where this worker serves its machine host (the host interface as a Connect-RPC service,
   * docs/architecture.md "The remote host"), which the control plane runs its sandboxes through.
   * Default: `host` and `port`.
   */
  serveHost?: { host: string; port: number };
}

export interface RunningFleetWorker {
  joined: RegisterHostResponse;
  /** The URL it registered: where its machine host is served. */
  url: string;
  /** The control plane it registered with (the first of the join URLs that answered). */
  joinedAt: string;
  /** Where its machine host is served (the same as `url`). */
  hostUrl: string;
  beats(): number;
  /** Stops heartbeating, stops its machines, closes its networks and its host's service; idempotent. */
  close(): Promise<void>;
}

/**
 * `sandtree worker`: this machine's host (its microVMs in the jail, its images, its networks, its
 * layers in its data dir) served over the network for a control plane, which runs the sandboxes it
 * places here through it; the worker holds no sandbox records, no database credentials and no API
 * key: it answers only the key derived from its current host secret and the join token (see
 * workerCallKey), which the control plane computes too.
 */
export async function startFleetWorker(o: FleetWorkerOptions): Promise<RunningFleetWorker> {
  let key: string | null = null;
  let joinedStore: string | null = null;
  const cfg = loadConfig(
    {
      ...(o.dataDir ? { dataDir: o.dataDir } : {}),
      ...(o.cacheDir ? { cacheDir: o.cacheDir } : {}),
      ...(o.accel ? { accel: o.accel } : {}),
      logger: false,
    },
    workerEnv(),
  );
  mkdirSync(cfg.dataDir, { recursive: true, mode: 0o700 });
  const log = workerLog(o.log);
  const { jail, off: jailOff } = serverJail(cfg);
  setKvmCpuModel(cfg.kvmCpuModel);
  const accel = await detectAccel(cfg.accel, { trialMs: cfg.accelTrialMs, jail });
  if (!jailOff) closeDataDir(cfg.dataDir);
  else log.warn({ jail: "off", why: jailOff }, "the machines' jail is off");
  const layersDir = path.join(cfg.dataDir, "layers");
  mkdirSync(layersDir, { recursive: true });
  // The fleet's object store once joined (its bucket, or this data dir): the host's layers port stores there.
  const blobs = new JoinedBlobStore(layersDir);
  // Opened by the control plane through the served host, with their state beside the worker's; this
  // machine's own settings say whether its sandboxes get networks, and from which pool.
  const networks = defaultHostNetworks(log, {
    enabled: cfg.network,
    ...(cfg.networkSubnet ? { subnet: cfg.networkSubnet } : {}),
  });
  // Its volumes' images (made, served and mounted by its host), unmounted once its networks (their file server) closed.
  const volumeImages = new VolumeImages({
    volumesDir: path.join(cfg.dataDir, "volumes"),
    volumeBound: cfg.volumeBound,
    volumeImageMiB: cfg.volumeImageMiB,
  });
  const host = await defaultHost({
    cfg,
    jail,
    accel,
    network: cfg.network !== "off",
    networks,
    layersDir,
    volumesDir: path.join(cfg.dataDir, "volumes"),
    volumeImages,
    log,
  });
  const at = o.serveHost ?? { host: o.host ?? "127.0.0.1", port: o.port ?? 7071 };
  const served = await serveMachineHost({
    host,
    listenHost: at.host,
    port: at.port,
    key: () => key,
    networksDir: path.join(cfg.dataDir, "host-networks"),
    blobs,
  });
  const url = advertisedUrl(served.url, o.advertiseUrl);
  const stop = async () => {
    await Promise.allSettled(served.served.running().map((m) => m.stop({ graceMs: 2000 })));
    await served.close();
    await networks.close({ destroy: true }).catch(() => {});
    await volumeImages.unmountAll().catch(() => {});
    blobs.close?.();
  };
  // runWorker's own options, passed on as given (join, dirs, accelerator, vCPUs, version, log, blob store).
  const { host: _host, port: _port, advertiseUrl: _advertiseUrl, serveHost: _serveHost, ...runWorkerOptions } = o;
  // Loaded lazily through the server module, as `serve` loads the host package.
  const { runWorker } = await import("@sandtree/host");
  let joined: Awaited<ReturnType<typeof runWorker>>["joined"];
  let heartbeats: Awaited<ReturnType<typeof runWorker>>["agent"];
  try {
    ({ joined, agent: heartbeats } = await runWorker({
      ...runWorkerOptions,
      hostUrl: url,
      // The layers its host holds (a restore without a shared object store is placed where they are).
      layers: async () => (await host.listLayers("")).filter((f) => !/^(live-|tmp-|base-)/.test(f)),
      onRegistered: (r) => {
        // The control plane's object store, from the first join on (a later join names the same one).
        if (!r.blob_store) blobs.keepLocal();
        else if (r.blob_store !== joinedStore) {
          const setting = BlobStoreUrl.parse(r.blob_store);
          blobs.use(makeBlobStore(setting, blobs.localDir));
          joinedStore = r.blob_store;
          o.log?.(`checkpoint layers go to ${r.blob_store}`);
        }
        key = workerCallKey(o.joinToken, r.host_id, sha256Hex(r.secret));
      },
    }));
  } catch (err) {
    await stop();
    if (err instanceof SandtreeError) throw err;
    throw new SandtreeError("UNAVAILABLE", `joining ${o.joinUrls.join(", ")} failed: ${(err as Error).message}`);
  }
  let closing: Promise<void> | null = null;
  return {
    joined,
    url,
    joinedAt: heartbeats.joinUrl,
    hostUrl: url,
    beats: () => heartbeats.beats,
    close() {
      closing ??= (async () => {
        await heartbeats.stop().catch(() => {});
        await stop();
      })();
      return closing;
    },
  };
}

/** The worker's warnings and errors as its own lines (it has no request log). */
function workerLog(line: ((l: string) => void) | undefined): Logger {
  const say = (o: object, m?: string) => line?.(`${m ?? ""} ${JSON.stringify(o)}`.trim());
  return { info: () => {}, warn: say, error: say };
}

/** The URL the control plane reaches the machine host at: the served one, on the advertised URL's host when there is one. */
function advertisedUrl(served: string, advertiseUrl: string | undefined): string {
  if (!advertiseUrl) return served;
  const u = new URL(served);
  u.hostname = new URL(advertiseUrl).hostname;
  return u.toString().replace(/\/+$/, "");
}
