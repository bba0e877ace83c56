/**
 * The workers whose host bundles are open in this process, or being opened: written by
 * WorkerBundles, read by placement (which chooses among them, and waits for one being opened) and
 * by RemoteSandboxes. Made before them all, so the sandbox service (placement) and the bundles
 * (which open hosts in it) need not know each other when they are built.
 */
export class OpenWorkers {
  private readonly open = new Set<string>();
  private readonly opening = new Map<string, Promise<void>>();

  /** The hosts (ids) sandboxes can be placed on through their bundles (open, or opening). */
  hostIds(): Set<string> {
    return new Set([...this.open, ...this.opening.keys()]);
  }

  /** Settles once a host's bundle being opened is open (or failed to). */
  async whenOpen(hostId: string): Promise<void> {
    await this.opening.get(hostId);
  }

  isOpening(hostId: string): boolean {
    return this.opening.has(hostId);
  }

  /** A bundle being opened, until `done` settles (it never rejects). */
  opens(hostId: string, done: Promise<void>): void {
    this.opening.set(hostId, done);
    void done.finally(() => {
      if (this.opening.get(hostId) === done) this.opening.delete(hostId);
    });
  }

  /** A bundle open (true) or dropped (false). */
  set(hostId: string, open: boolean): void {
    if (open) this.open.add(hostId);
    else this.open.delete(hostId);
  }
}
