import { type SandboxStatus, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { StrandedStart } from "../../store/host-store.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "../sandboxes/error-end.js";
import { ACTIVE } from "../sandboxes/sandbox-machines.js";
import type { HostBundle } from "../sandboxes/sandbox-parts.js";
import { machineNameOf } from "../sandboxes/sandbox-paths.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import type { FleetEvents } from "./fleet-events.js";
import type { FleetService } from "./fleet-service.js";
import { machinePid } from "./peer-reach.js";

export interface PeerTakeoverDeps {
  fleet: FleetService;
  events: FleetEvents;
  sandboxes: SandboxService;
  store: Store;
  log: Logger;
  /** One adoption, all steps (ms; default 10 s). */
  adoptDeadlineMs?: number;
}

const STARTING: readonly SandboxStatus[] = ["PENDING", "PROVISIONING"];

/**
 * The sandboxes other control planes on the shared database placed on workers. While their placer
 * lives, one is reached here for access only (PeerReach), its supervision and the record of its
 * exit left to its placer. Once its placer's own host is LOST,
 * each is taken over by exactly one survivor (`sweep`, after each reaping: a conditional change of
 * its placement's `placed_by`): a running one is supervised here from then on, a start in flight
 * is finished from what the worker runs (RUNNING, "its start finished here") or ended `HOST_LOST`
 * naming the lost control plane, and a placement never admitted is released.
 */
export class PeerTakeover {
  private readonly following = new Set<string>();
  private stopped = false;

  constructor(private readonly deps: PeerTakeoverDeps) {
    // After each reaping, once the workers registered at peers are opened (stage "hosts").
    deps.events.on("reaped", "sandboxes", () => this.sweep());
  }

  /** Takes over, in the background, every sandbox placed by a peer whose own host is LOST, not yet followed. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    for (const p of await this.deps.fleet.placedByLostPeers()) {
      if (this.following.has(p.sandbox_id)) continue;
      this.following.add(p.sandbox_id);
      void this.takeOver(p)
        .catch((err: Error) => this.deps.log.warn({ sandbox: p.sandbox_id, err: err.message }, "taking over a sandbox failed"))
        .finally(() => this.following.delete(p.sandbox_id));
    }
  }

  /** Stops taking sandboxes over (the server is closing); idempotent. */
  stop(): void {
    this.stopped = true;
  }

  private async takeOver(p: StrandedStart): Promise<void> {
    const { fleet, store, sandboxes, log } = this.deps;
    const id = p.sandbox_id;
    const sb = await store.getSandbox(id);
    const placer = await fleet.hostName(p.placed_by);
    const hostName = await fleet.hostName(p.host_id);
    if (!sb || TERMINAL_STATUSES.includes(sb.status)) {
      // Never admitted (its placer stopped in between), or ended before its placer released it.
      if ((await fleet.takeOver(id, p.placed_by)) && (await fleet.release(id)))
        log.warn({ sandbox: id, control_plane: placer }, "released a stopped control plane's placement");
      return;
    }
    const starting = STARTING.includes(sb.status);
    const lost = `HOST_LOST: control plane ${placer}, which was ${starting ? "starting" : "running"} it on host ${hostName}, stopped`;
    const bundle = sandboxes.bundles.named(hostName);
    if (!bundle) {
      // A host this process reaches later (its bundle opening) is taken over at a later sweep.
      const runsNone = !(await fleet.workerHostUrls()).has(p.host_id);
      if (starting && runsNone && (await fleet.takeOver(id, p.placed_by)))
        await this.end(null, id, `${lost} (the host runs no sandboxes)`);
      return;
    }
    if (this.stopped || !(await fleet.takeOver(id, p.placed_by))) return;
    let machine = sandboxes.bundles.unreach(id);
    if (!machine || machine.exit) {
      // Its host out of reach now: the sandbox is this process's, adopted when its bundle opens again (or ended HOST_LOST with it).
      const pid = await machinePid(bundle, id).catch((err: Error) => {
        log.warn({ sandbox: id, host: hostName, err: err.message }, "a stopped control plane's sandbox's host did not answer");
        return null;
      });
      if (pid === null) return;
      if (pid === undefined)
        return this.end(bundle, id, `${lost} ${starting ? "before its host ran it" : "and its machine there is gone"}`);
      const spec = {
        name: machineNameOf(id),
        pid,
        deadlineMs: this.deps.adoptDeadlineMs ?? 10_000,
        keepPaused: sb.status === "PAUSED",
      };
      try {
        machine = await bundle.host.adopt(spec);
      } catch (err) {
        return this.end(bundle, id, `${lost}, and its machine did not answer: ${(err as Error).message}`);
      }
    }
    if (starting) {
      const at = new Date().toISOString();
      if (await store.updateSandbox(id, { status: "RUNNING", started_at: at }, STARTING)) {
        await store.addEvent(id, `running on host ${hostName} (its start finished here: control plane ${placer} had stopped)`);
      }
    } else {
      await store.addEvent(id, `supervised by another control plane: ${placer}, which ran it on host ${hostName}, stopped`);
    }
    const now = (await store.getSandbox(id))?.status;
    if (now !== "RUNNING" && now !== "PAUSED") {
      // Ended meanwhile (a delete through this or another control plane): its machine goes.
      await machine.stop({ graceMs: 0 }).catch(() => {});
      return this.end(bundle, id, `${lost} and it ended meanwhile`);
    }
    sandboxes.bundles.place(id, bundle);
    bundle.machines.supervise(id, machine, now);
    log.info({ sandbox: id, host: hostName, control_plane: placer, status: now }, "took over a stopped control plane's sandbox");
  }

  /** Ends a sandbox still active with the reason (conditional: once), removes what it left on its host, releases its placement. */
  private async end(bundle: HostBundle | null, id: string, reason: string): Promise<void> {
    const { store, fleet, log } = this.deps;
    if (await store.updateSandbox(id, errorEnd("HOST_LOST", reason), ACTIVE)) {
      await store.addEvent(id, `error: ${reason}`);
      log.warn({ sandbox: id, reason }, "ended a stopped control plane's sandbox");
    }
    if (bundle) {
      await bundle.machines.cleanupDisk(id).catch(() => {});
      await bundle.machines.discard(id);
    }
    await fleet.release(id);
  }
}
