import path from "node:path";
import {
  type Accel,
  type BlobStore,
  detectAccel,
  type GuestArtifacts,
  guestArtifacts,
  type JailConfig,
  setKvmCpuModel,
  VolumeImages,
} from "@sandtree/host";
import type { FastifyBaseLogger } from "fastify";
import { makeBlobStore } from "./blob-store-config.js";
import type { ServerConfigValues } from "./config.js";
import { jailOffWarning, serverJail } from "./default-host.js";
import { closeDataDir } from "./jail-setup.js";
import type { StartServerOptions } from "./server.js";
import { type JoinToken, loadOrCreateJoinToken } from "./services/fleet/join-token.js";
import { checkSharedKeys } from "./services/fleet/shared-keys.js";
import { systemClock } from "./services/metering/clock.js";
import { MeteringService } from "./services/metering/metering-service.js";
import { loadPriceTable } from "./services/metering/prices.js";
import type { Logger } from "./services/observability/logger.js";
import { AdmissionService } from "./services/sandboxes/admission-service.js";
import { AuthService } from "./services/teams/auth-service.js";
import { loadOrCreateServerKey, SecretBox } from "./services/teams/secret-box.js";
import { openKeyFingerprints, openStore } from "./store/open-store.js";
import type { Store } from "./store/store.js";
import type { UnwindStack } from "./unwind-stack.js";

/** What every later step of a start stands on: the store, keys, accounting, blobs, the log. */
export interface Foundation {
  store: Store;
  metering: MeteringService;
  accel: Accel;
  /** The jail of this server's machines (default-host.ts: serverJail). */
  jail: JailConfig;
  guest: GuestArtifacts;
  auth: AuthService;
  /** Set on the first start only: the admin key of the default team. */
  firstKey: string | null;
  serverKey: Buffer;
  joinToken: JoinToken;
  admission: AdmissionService;
  /** The server's log (silent when logging is off); lines before the app exists wait for it. */
  log: Logger;
  early: EarlyLog;
  blobs: BlobStore;
  /** Each volume's image (its size bound), mounted under the volumes directory. */
  volumeImages: VolumeImages;
}

const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** Lines logged before the app (and its logger) exists, e.g. by adoption, written once it does. */
export class EarlyLog implements Logger {
  private target: FastifyBaseLogger | null = null;
  private readonly lines: Array<["info" | "warn" | "error", object, string | undefined]> = [];
  info(o: object, m?: string): void {
    if (this.target) this.target.info(o, m);
    else this.lines.push(["info", o, m]);
  }
  warn(o: object, m?: string): void {
    if (this.target) this.target.warn(o, m);
    else this.lines.push(["warn", o, m]);
  }
  error(o: object, m?: string): void {
    if (this.target) this.target.error(o, m);
    else this.lines.push(["error", o, m]);
  }
  attach(target: FastifyBaseLogger): void {
    this.target = target;
    for (const [lvl, o, m] of this.lines.splice(0)) target[lvl](o, m);
  }
}

/** The start's first steps; each pushes its undoing on `unwind`. */
export async function openFoundation(
  cfg: ServerConfigValues,
  opts: StartServerOptions,
  unwind: UnwindStack,
): Promise<Foundation> {
  const store = await openStore(cfg);
  unwind.push("the store", () => store.close());
  // Before anything can change a sandbox's state: every transition is metered on this clock.
  const metering = new MeteringService(store, opts.clock ?? systemClock, loadPriceTable(cfg.prices));
  const guest = guestArtifacts(cfg.cacheDir);
  const { jail, off: jailOff } = serverJail(cfg);
  // Before the trial boot: it starts a VM with the CPU every later one gets (in the same jail).
  setKvmCpuModel(cfg.kvmCpuModel);
  const accel = await detectAccel(cfg.accel, { trialMs: cfg.accelTrialMs, jail });
  const auth = new AuthService(store);
  const firstKey = await auth.bootstrap();
  // Every server on one database holds the same keys: refused here, before anything starts.
  const serverKey = loadOrCreateServerKey(cfg.dataDir);
  const joinToken = loadOrCreateJoinToken(cfg.dataDir);
  await checkSharedKeys(openKeyFingerprints(store), cfg.dataDir, [
    { name: "server.key", key: serverKey },
    { name: "join-token", key: joinToken.token },
  ]);
  if (!jailOff) closeDataDir(cfg.dataDir);
  const admission = new AdmissionService(store, new SecretBox(serverKey), (teamId) => metering.checkBudget(teamId));
  const early = new EarlyLog();
  if (jailOff) early.warn({ jail: "off", why: jailOff }, jailOffWarning(jailOff));
  const log = cfg.logger ? early : silentLogger;
  // Sandbox disks live beside the layers they overlay: in the local store's directory, or in the
  // local cache of a remote one.
  const layersDir = path.join(cfg.dataDir, "layers");
  const blobs = makeBlobStore(cfg.blobStore, layersDir);
  unwind.push("the blob store", () => blobs.close?.());
  const volumeImages = new VolumeImages({
    volumesDir: path.join(cfg.dataDir, "volumes"),
    volumeBound: cfg.volumeBound,
    volumeImageMiB: cfg.volumeImageMiB,
  });
  // The volumes' images are unmounted once the host's file server (which holds them open) is gone:
  // it closes with the host's networks, opened later in the start and so closed before this.
  unwind.push("the volume images", () => volumeImages.unmountAll());
  return {
    jail,
    store,
    metering,
    accel,
    guest,
    auth,
    firstKey,
    serverKey,
    joinToken,
    admission,
    log,
    early,
    blobs,
    volumeImages,
  };
}
