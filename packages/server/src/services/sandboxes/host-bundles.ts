import type { Machine } from "@sandtree/host";
import type { HostBundle } from "./sandbox-parts.js";

/**
 * The bundles of the hosts sandboxes are placed on (today this process's own), and the one each
 * sandbox is on: what reaches a sandbox's machine (exec, files, PTY, ports, desktop, checkpoints,
 * reset, pause) asks here by sandbox id, whichever host runs it.
 */
export class HostBundles {
  private readonly hosts = new Map<string, HostBundle>();
  /** The bundle each sandbox started here was placed on (one adopted after a restart: the local one). */
  private readonly placed = new Map<string, HostBundle>();
  /** This process's own host. */
  readonly local: HostBundle;

  constructor(local: HostBundle) {
    this.local = local;
    this.hosts.set(local.name, local);
  }

  all(): HostBundle[] {
    return [...this.hosts.values()];
  }

  /** A sandbox admitted on a bundle's site: its machine starts there. */
  place(id: string, bundle: HostBundle): void {
    this.placed.set(id, bundle);
  }

  /** The bundle of the host a sandbox is placed on. */
  of(id: string): HostBundle {
    return this.placed.get(id) ?? this.local;
  }

  /** A sandbox torn down: nothing of it is left on its host. */
  release(id: string): void {
    this.placed.delete(id);
  }

  machine(id: string): Machine | undefined {
    return this.of(id).machines.get(id);
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
