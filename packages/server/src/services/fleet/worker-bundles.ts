import path from "node:path";
import { connectRemoteHost, type RemoteHost as HostClient, type RemoteHostOptions } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import { type NetworkConfig, NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { KeyedSerial } from "../support/keyed-serial.js";
import type { FleetEvents } from "./fleet-events.js";
import type { FleetService } from "./fleet-service.js";
import type { OpenWorkers } from "./open-workers.js";

export interface WorkerBundlesDeps {
  fleet: FleetService;
  /** Subscribed to: a worker that joins is opened, one lost dropped, those joined at peers opened after each reaping. */
  events: FleetEvents;
  /** Where the bundles open and opening are told (placement reads it). */
  doors: OpenWorkers;
  sandboxes: SandboxService;
  store: Store;
  log: Logger;
  dataDir: string;
  /** The control plane's network settings, less its own address pool (each worker chooses its own). */
  network: NetworkConfig;
  /** Connects to a worker's machine host (a test may wrap it). */
  connect?: (o: RemoteHostOptions) => Promise<HostClient>;
  /** How long a worker that just registered may take to answer its new key (default 15 s). */
  joinDeadlineMs?: number;
}

interface Opened {
  name: string;
  client: HostClient;
  /** The worker's call key it was opened with (another changes when it registers again, wherever). */
  key: string | null;
}

/** How long a worker whose host failed to open is left before trying it again (catchUp). */
const RETRY_MS = 10_000;

/**
 * Each worker that serves its machine host, as a bundle of the sandbox service (SandboxService.addHost):
 * a RemoteHost with the worker's call key, that host's sandbox networks opened through it, and the
 * sandboxes this control plane placed there adopted again (its reconciler, as the local host's at
 * a restart). Opened when a worker registers (again) and, at start, for every worker not LOST;
 * dropped when it is lost. Closing leaves the worker's machines running (another start adopts them).
 */
export class WorkerBundles {
  private readonly open = new Map<string, Opened>();
  private readonly serial = new KeyedSerial();
  /** When a worker's host last failed to open here. */
  private readonly failedAt = new Map<string, number>();
  private closed = false;

  constructor(private readonly deps: WorkerBundlesDeps) {
    const { events, log } = deps;
    events.on("joined", "hosts", (hostId, url) =>
      this.joined(hostId, url).catch((err: Error) =>
        log.warn({ host_id: hostId, url, err: err.message }, "opening a worker's host failed"),
      ),
    );
    // Before its sandboxes are ended (stage "sandboxes", HostLostService).
    events.on("lost", "hosts", (lost) => this.lost(lost.host.id));
    events.on("reaped", "hosts", () => this.catchUp());
  }

  /** At start: the bundle of every worker that serves its host and is not LOST. */
  async openAll(): Promise<void> {
    const { fleet, log } = this.deps;
    for (const [hostId, url] of await fleet.workerHostUrls()) {
      const state = await fleet.hostState(hostId);
      if (state === undefined || state === "LOST") continue;
      await this.joined(hostId, url).catch((err: Error) =>
        log.warn(
          { host_id: hostId, url, err: err.message },
          "opening a worker's host failed: it takes no sandbox until it registers again",
        ),
      );
    }
  }

  /**
   * After each reaping: the bundle of every worker not LOST that serves its host and is not open
   * here (it registered at a peer control plane), or registered again since it was opened (its
   * key changed), opened in the background.
   */
  async catchUp(): Promise<void> {
    const { fleet, log } = this.deps;
    for (const [hostId, url] of await fleet.workerHostUrls()) {
      if (this.closed || this.deps.doors.isOpening(hostId) || Date.now() - (this.failedAt.get(hostId) ?? 0) < RETRY_MS) continue;
      const o = this.open.get(hostId);
      if (o) await fleet.refreshHost(hostId);
      if (o && o.key === fleet.callKeyOf(hostId)) continue;
      if ((await fleet.hostState(hostId)) !== "LOST")
        void this.joined(hostId, url).catch((err: Error) =>
          log.warn({ host_id: hostId, url, err: err.message }, "opening a worker's host failed"),
        );
    }
  }

  /** A worker registered (again) with its host at `url`: its bundle is opened anew there. */
  joined(hostId: string, url: string): Promise<void> {
    const opened = this.serial.run(hostId, async () => {
      if (this.closed) return;
      this.drop(hostId);
      const { fleet, sandboxes, log } = this.deps;
      const name = await fleet.hostName(hostId);
      const client = await this.connect(hostId, url);
      try {
        const network = new NetworkService({
          store: this.deps.store,
          log,
          networks: client.networks,
          dataDir: path.join(this.deps.dataDir, "hosts", hostId),
          config: this.deps.network,
        });
        const { mine } = await fleet.placementsOn(hostId);
        // Only its own sandboxes' rules and tunnels: every other sandbox with an address is another host's.
        const slotted = await this.deps.store.listSlottedNetworks();
        await network.start({ notMine: new Set(slotted.map((r) => r.sandbox_id).filter((id) => !mine.has(id))) });
        const bundle = sandboxes.addHost({ name, host: client, network, images: client.images, livesApart: true }, mine);
        this.open.set(hostId, { name, client, key: fleet.callKeyOf(hostId) });
        this.deps.doors.set(hostId, true);
        this.failedAt.delete(hostId);
        // Its peers' sandboxes there are theirs (reached here for access, taken over when their placer is lost: PeerTakeover).
        const leave = async () => (await fleet.placementsOn(hostId)).others;
        const { settled } = await bundle.reconciler.reconcile({ placedHere: mine, leave });
        void settled.catch((err: Error) =>
          log.error({ host: name, err: err.message }, "reconciling a worker's sandboxes failed"),
        );
        log.info({ host: name, url, sandboxes: mine.size }, "worker's host opened");
      } catch (err) {
        this.drop(hostId);
        client.close();
        throw err;
      }
    });
    this.deps.doors.opens(
      hostId,
      opened.catch(() => {
        this.failedAt.set(hostId, Date.now());
      }),
    );
    return opened;
  }

  /** A worker lost: its bundle goes (its sandboxes ended with it, see HostLostService). */
  lost(hostId: string): Promise<void> {
    return this.serial.run(hostId, async () => this.drop(hostId));
  }

  /** Stops opening hosts and closes every connection; the workers' machines run on. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.open.keys()].map((id) => this.serial.run(id, async () => this.drop(id))));
  }

  private drop(hostId: string): void {
    const o = this.open.get(hostId);
    if (!o) return;
    this.open.delete(hostId);
    this.deps.doors.set(hostId, false);
    this.deps.sandboxes.dropHost(o.name);
    o.client.close();
  }

  /** Connects with the worker's current key, trying again while it has not yet heard the secret that key is made of. */
  private async connect(hostId: string, url: string): Promise<HostClient> {
    const { fleet } = this.deps;
    const connect = this.deps.connect ?? connectRemoteHost;
    const deadline = Date.now() + (this.deps.joinDeadlineMs ?? 15_000);
    for (;;) {
      await fleet.refreshHost(hostId);
      try {
        return await connect({ url, key: () => fleet.callKeyOf(hostId) ?? "" });
      } catch (err) {
        const refused = err instanceof SandtreeError && err.code === "UNAUTHORIZED";
        if (!refused || Date.now() > deadline || this.closed) throw err;
        await new Promise<void>((resolve) => setTimeout(resolve, 100));
      }
    }
  }
}
