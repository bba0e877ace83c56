import type { LostHost } from "../../store/host-store.js";

/** What the fleet tells the parts that follow it. */
export interface FleetEventArgs {
  /** A worker registered (again), serving its machine host at `hostUrl`. */
  joined: [hostId: string, hostUrl: string];
  /** The reaper marked a host LOST (a heartbeat too long ago), with the sandboxes placed on it. */
  lost: [lost: LostHost];
  /** A reaping ended (whatever it marked). */
  reaped: [];
}

export type FleetEvent = keyof FleetEventArgs;

/**
 * The order the parts that follow the fleet hear an event in, whatever order they were built in:
 * the hosts' bundles first (a lost worker's closed, one that joined at a peer opened), then the
 * sandboxes on them (a lost host's ended, a lost peer's taken over), then the volumes (a lost
 * host's marked, once no sandbox there mounts them).
 */
export const FLEET_STAGES = ["hosts", "sandboxes", "volumes"] as const;
export type FleetStage = (typeof FLEET_STAGES)[number];

type Listener<E extends FleetEvent> = (...args: FleetEventArgs[E]) => Promise<void> | void;

/**
 * The fleet's events, made before the fleet and every part that follows it: each part subscribes
 * in its own constructor (WorkerBundles, PeerTakeover, HostLostService, VolumeSyncs), the fleet
 * emits; so nothing is bound to the fleet after it is built, and the cycle between the fleet, the
 * workers' bundles and the sandbox service they open bundles in has no setter.
 */
export class FleetEvents {
  private readonly listeners: { [E in FleetEvent]: Array<{ stage: FleetStage; listener: Listener<E> }> } = {
    joined: [],
    lost: [],
    reaped: [],
  };

  /** Subscribes a listener at its stage (those of one stage in the order they subscribed). */
  on<E extends FleetEvent>(event: E, stage: FleetStage, listener: Listener<E>): void {
    this.listeners[event].push({ stage, listener });
  }

  /** Tells every listener of the event, stage after stage, each awaited; the first failure ends it and is thrown. */
  async emit<E extends FleetEvent>(event: E, ...args: FleetEventArgs[E]): Promise<void> {
    const all = this.listeners[event] as Array<{ stage: FleetStage; listener: Listener<E> }>;
    for (const stage of FLEET_STAGES) {
      for (const l of all) if (l.stage === stage) await l.listener(...args);
    }
  }
}
