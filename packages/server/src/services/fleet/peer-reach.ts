import type { Machine } from "@sandtree/host";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import type { HostBundles, PeersReach } from "../sandboxes/host-bundles.js";
import type { HostBundle } from "../sandboxes/sandbox-parts.js";
import { machineNameOf } from "../sandboxes/sandbox-paths.js";
import type { FleetService } from "./fleet-service.js";

export interface PeerReachDeps {
  fleet: FleetService;
  store: Store;
  log: Logger;
  /** One adoption, all steps (ms; default 10 s). */
  adoptDeadlineMs?: number;
}

/** The pid of the machine a bundle's host runs for a sandbox (undefined: none runs). */
export async function machinePid(bundle: HostBundle, id: string): Promise<number | undefined> {
  const name = machineNameOf(id);
  return (await bundle.host.survivors()).find((s) => s.name === name)?.pid;
}

/**
 * How a sandbox another control plane on the shared database placed on a worker is reached here,
 * for access only (exec, files, ports, PTY): its machine adopted into this process's bundle of that
 * worker, paused or not as its record says (the worker's host answers a machine it runs as it is);
 * its supervision and the record of its exit stay its placer's (see PeerTakeover for after it is lost).
 * Made before the sandbox service, whose bundles ask it (HostBundles.reachPeer).
 */
export class PeerReach implements PeersReach {
  private readonly reaching = new Map<string, Promise<Machine | undefined>>();

  constructor(private readonly deps: PeerReachDeps) {}

  /** The machine of a sandbox placed on a worker `bundles` has a bundle of; undefined if none runs. One reach per sandbox at a time. */
  reach(bundles: HostBundles, id: string): Promise<Machine | undefined> {
    let r = this.reaching.get(id);
    if (!r) {
      r = this.reachOnce(bundles, id).finally(() => this.reaching.delete(id));
      this.reaching.set(id, r);
    }
    return r;
  }

  private async reachOnce(bundles: HostBundles, id: string): Promise<Machine | undefined> {
    const { fleet, log } = this.deps;
    const hostId = await fleet.placedOn(id);
    if (!hostId || fleet.isLocal(hostId)) return undefined;
    const bundle = bundles.named(await fleet.hostName(hostId));
    if (!bundle) return undefined;
    try {
      // As it is: a paused sandbox stays paused (the worker's host adopts its machine again as asked).
      const paused = (await this.deps.store.getSandbox(id))?.status === "PAUSED";
      const machine = await this.adopt(bundle, id, paused);
      if (machine && !machine.exit) bundles.addReached(id, bundle, machine);
      return machine;
    } catch (err) {
      log.warn({ sandbox: id, host: bundle.name, err: (err as Error).message }, "reaching a peer's sandbox failed");
      return undefined;
    }
  }

  /** Adopts the machine the bundle's host runs for a sandbox, paused or not as asked (undefined: none runs). */
  private async adopt(bundle: HostBundle, id: string, keepPaused: boolean): Promise<Machine | undefined> {
    const pid = await machinePid(bundle, id);
    if (pid === undefined) return undefined;
    return bundle.host.adopt({ name: machineNameOf(id), pid, deadlineMs: this.deps.adoptDeadlineMs ?? 10_000, keepPaused });
  }
}
