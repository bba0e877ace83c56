import type { Machine } from "@sandtree/host";
import type { HostBundle } from "./sandbox-parts.js";

/** How the machine of a sandbox a peer control plane placed on a worker is reached here (fleet/peer-reach.ts). */
export interface PeersReach {
  reach(bundles: HostBundles, id: string): Promise<Machine | undefined>;
}

/**
 * The bundles of the hosts sandboxes are placed on (this process's own, and each worker's remote
 * host once it joined), and the one each
 * sandbox is on: what reaches a sandbox's machine (exec, files, PTY, ports, desktop, checkpoints,
 * reset, pause) asks here by sandbox id, whichever host runs it.
 */
export class HostBundles {
  private readonly hosts = new Map<string, HostBundle>();
  /** The bundle each sandbox started here was placed on (one adopted after a restart: the local one). */
  private readonly placed = new Map<string, HostBundle>();
  /**
   * Machines of sandboxes a peer control plane placed and supervises, reached here for access only
   * (exec, files, ports, PTY through this process): their exit is their placer's to record.
   */
  private readonly reached = new Map<string, { bundle: HostBundle; machine: Machine }>();
  /** This process's own host. */
  readonly local: HostBundle;

  /** `peers`: absent where no peer control plane shares the store (nothing of a peer is reached). */
  constructor(
    local: HostBundle,
    private readonly peers?: PeersReach,
  ) {
    this.local = local;
    this.hosts.set(local.name, local);
  }

  all(): HostBundle[] {
    return [...this.hosts.values()];
  }

  /** A host sandboxes may now be placed on (a worker that joined). Its name must be new. */
  add(bundle: HostBundle): void {
    if (this.hosts.has(bundle.name)) throw new Error(`host ${bundle.name} already has a bundle`);
    this.hosts.set(bundle.name, bundle);
  }

  /** The bundle of a host by its name in the fleet's registry. */
  named(name: string): HostBundle | undefined {
    return this.hosts.get(name);
  }

  /**
   * A host gone (a worker lost or registered again): its bundle goes, with the sandboxes placed on
   * it (their records ended with their host). Answers it for its owner to close; never the local one.
   */
  drop(name: string): HostBundle | undefined {
    const b = this.hosts.get(name);
    if (!b || b === this.local) return undefined;
    this.hosts.delete(name);
    for (const [id, on] of this.placed) if (on === b) this.placed.delete(id);
    for (const [id, r] of this.reached) if (r.bundle === b) this.reached.delete(id);
    return b;
  }

  /** A sandbox admitted on a bundle's site: its machine starts there. */
  place(id: string, bundle: HostBundle): void {
    this.placed.set(id, bundle);
  }

  /** The bundle of the host a sandbox is placed on (or reached on, a peer's). */
  of(id: string): HostBundle {
    return this.placed.get(id) ?? this.reached.get(id)?.bundle ?? this.local;
  }

  /** The machine of a peer's sandbox on a worker, reached through this process's bundle of it (undefined: none). */
  async reachPeer(id: string): Promise<Machine | undefined> {
    if (this.placed.has(id)) return undefined;
    return this.peers?.reach(this, id).catch(() => undefined);
  }

  /** A peer's sandbox's machine reached on a bundle's host, until it exits or is taken (see PeerTakeover). */
  addReached(id: string, bundle: HostBundle, machine: Machine): void {
    this.reached.set(id, { bundle, machine });
    machine.once("exit", () => {
      if (this.reached.get(id)?.machine === machine) this.reached.delete(id);
    });
  }

  /** The machine a peer's sandbox was reached by, forgotten here (its placer's supervision goes on, or it is taken over). */
  unreach(id: string): Machine | undefined {
    const r = this.reached.get(id);
    this.reached.delete(id);
    return r?.machine;
  }

  /** A sandbox torn down: nothing of it is left on its host. */
  release(id: string): void {
    this.placed.delete(id);
    this.reached.delete(id);
  }

  machine(id: string): Machine | undefined {
    const placed = this.placed.get(id);
    if (placed) return placed.machines.get(id);
    return this.reached.get(id)?.machine ?? this.local.machines.get(id);
  }

  /** A sandbox's adoption after a restart, while it runs. */
  adoption(id: string): { abort: AbortController; done: Promise<void> } | undefined {
    return this.of(id).reconciler.adopting.get(id);
  }

  /**
   * Stops every host's warm builds, then cancels the adoptions in flight (each kills its machine);
   * answers the sandboxes that had a machine or an adoption, for the caller to end.
   */
  async close(reason: string): Promise<Set<string>> {
    const all = this.all();
    await Promise.all(all.map((b) => b.warm.close()));
    const ids = new Set<string>();
    for (const b of all) {
      for (const id of [...b.machines.ids(), ...b.reconciler.adopting.keys()]) ids.add(id);
      for (const a of b.reconciler.adopting.values()) a.abort.abort(new Error(reason));
    }
    return ids;
  }
}
