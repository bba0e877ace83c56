import type { SandboxPatch } from "./rows.js";

/**
 * What both store backends keep beside their tables: the clock meter records are stamped with
 * (metering's; tests control it) and the listeners told of each committed sandbox status change.
 */
export abstract class StoreHooks {
  /** The time meter records are stamped with. */
  protected meterNow: () => number = Date.now;
  private readonly statusListeners: Array<(id: string, patch: SandboxPatch) => void> = [];

  onSandboxStatus(listener: (id: string, patch: SandboxPatch) => void): void {
    this.statusListeners.push(listener);
  }

  setMeterClock(now: () => number): void {
    this.meterNow = now;
  }

  /** Tells every listener of a committed status change; one that throws does not stop the others. */
  protected statusChanged(id: string, patch: SandboxPatch): void {
    for (const l of this.statusListeners) {
      try {
        l(id, patch);
      } catch {}
    }
  }
}
