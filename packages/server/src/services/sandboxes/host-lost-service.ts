import type { LostHost } from "../../store/host-store.js";
import type { Store } from "../../store/store.js";
import type { FleetEvents } from "../fleet/fleet-events.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "./error-end.js";
import { ACTIVE } from "./sandbox-machines.js";

export interface HostLostDeps {
  store: Store;
  log: Logger;
  /** Gives a sandbox's placement (and its host's capacity) back. */
  release: (sandboxId: string) => Promise<boolean>;
  /** Subscribed to: a lost host's sandboxes are ended once its bundle is closed (stage "hosts"). */
  events: FleetEvents;
}

/** `error_reason` of a sandbox whose host was lost: starts with the error code, then says why. */
export function hostLostReason(lost: LostHost): string {
  return `HOST_LOST: host ${lost.host.name} sent no heartbeat since ${lost.host.last_heartbeat_at}`;
}

/**
 * What becomes of the sandboxes of a host the reaper marked LOST: each still active becomes
 * ERROR with reason `HOST_LOST: ...` by a conditional status change (from an active status only:
 * a second reaper, a second control plane or a retry changes nothing; its meter interval closes
 * in the same transaction, so billing stops), gets an event, and its placement is released.
 * Sandboxes that had already ended only lose their placement.
 */
export class HostLostService {
  constructor(private readonly deps: HostLostDeps) {
    deps.events.on("lost", "sandboxes", async (lost) => {
      await this.sandboxesLost(lost);
    });
  }

  async sandboxesLost(lost: LostHost): Promise<{ marked: string[] }> {
    const { store, log } = this.deps;
    const reason = hostLostReason(lost);
    const marked: string[] = [];
    for (const id of lost.sandboxIds) {
      try {
        const changed = await store.updateSandbox(id, errorEnd("HOST_LOST", reason), ACTIVE);
        if (changed) {
          marked.push(id);
          await store.addEvent(id, `error: ${reason}`);
        }
        await this.deps.release(id);
      } catch (err) {
        log.error({ sandbox: id, host: lost.host.name, err: (err as Error).message }, "marking a lost host's sandbox failed");
      }
    }
    if (marked.length > 0) log.warn({ host: lost.host.name, sandboxes: marked.length }, "sandboxes lost with their host");
    return { marked };
  }
}
