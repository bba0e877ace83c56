import { SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { StrandedStart } from "../../store/host-store.js";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "../sandboxes/error-end.js";
import type { FleetService } from "./fleet-service.js";
import { type RemoteSandboxes, WorkerSandbox } from "./remote-sandboxes.js";

export interface StrandedStartsDeps {
  fleet: FleetService;
  store: Store;
  remote: RemoteSandboxes;
  log: Logger;
  /** How long a taken-over start may stay unfinished on its worker (default 10 min). */
  startDeadlineMs?: number;
  /** Between two looks at the worker (default 250 ms). */
  pollMs?: number;
}

const STARTING = ["PENDING", "PROVISIONING"] as const;

/**
 * Creates whose control plane stopped while starting them on a worker: a peer's whose own host
 * is LOST (a `kill -9` of one control plane on a shared database), or this process's own from
 * before a restart. After each reaping, every such create is taken over by whichever surviving
 * control plane sweeps first: it asks the worker and finishes the row (RUNNING with the worker's
 * digest), ends it with the worker's reason, or, when the worker never got it, ends it `ERROR`
 * `HOST_LOST` naming the control plane that was lost. Every change is conditional on the row
 * still starting, so two survivors (or a starter that was only slow) finish it once. A placement
 * whose sandbox was never admitted (its control plane stopped in between) is released.
 */
export class StrandedStarts {
  private readonly following = new Set<string>();
  private readonly abort = new AbortController();

  constructor(private readonly deps: StrandedStartsDeps) {}

  /** One sweep: takes over every stranded start not yet followed (each in the background). */
  async sweep(): Promise<void> {
    if (this.abort.signal.aborted) return;
    for (const s of await this.deps.fleet.strandedStarts()) {
      if (this.following.has(s.sandbox_id) || this.deps.remote.isStarting(s.sandbox_id)) continue;
      this.following.add(s.sandbox_id);
      void this.finish(s)
        .catch((err: Error) =>
          this.deps.log.warn({ sandbox: s.sandbox_id, err: err.message }, "finishing a stranded start failed"),
        )
        .finally(() => this.following.delete(s.sandbox_id));
    }
  }

  /** Stops following (the server is closing); idempotent. */
  stop(): void {
    this.abort.abort();
  }

  private async finish(s: StrandedStart): Promise<void> {
    const { fleet, store, log } = this.deps;
    const id = s.sandbox_id;
    const sb = await store.getSandbox(id);
    const starter = await fleet.hostName(s.placed_by);
    if (!sb) {
      // Placed, never admitted: the reservation alone is left.
      await fleet.release(id);
      log.warn({ sandbox: id, control_plane: starter }, "released a placement whose create was never admitted");
      return;
    }
    if (!(STARTING as readonly string[]).includes(sb.status)) return;
    const host = await fleet.remoteHost(s.host_id);
    const hostName = host?.name ?? (await fleet.hostName(s.host_id));
    const lost = `HOST_LOST: control plane ${starter}, which was starting it on host ${hostName}, stopped`;
    if (!host) return this.end(id, `${lost} (the host runs no sandboxes)`);
    const deadline = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.deps.startDeadlineMs ?? 600_000)]);
    for (;;) {
      let answer: unknown;
      try {
        answer = await this.deps.remote.client.call(host, "GET", `/v1/sandboxes/${id}`, { signal: deadline });
      } catch (err) {
        if (this.abort.signal.aborted) return;
        if (err instanceof SandtreeError && err.code === "SANDBOX_NOT_FOUND") {
          return this.end(id, `${lost} before the host had it`);
        }
        if (deadline.aborted) {
          await this.deps.remote.client.call(host, "DELETE", `/v1/sandboxes/${id}`, {}).catch(() => {});
          return this.end(id, `${lost}, and the host did not bring it up in time`);
        }
        // The worker is unreachable: the next sweep asks again (or its own HOST_LOST ends the row).
        log.warn({ sandbox: id, host: hostName, err: (err as Error).message }, "a stranded start's worker did not answer");
        return;
      }
      const w = WorkerSandbox.parse(answer);
      if (w.status === "RUNNING") {
        const patch = { status: "RUNNING" as const, started_at: new Date().toISOString(), image_digest: w.image_digest ?? null };
        if (await store.updateSandbox(id, patch, [...STARTING])) {
          await store.addEvent(id, `running on host ${hostName} (its start finished here: control plane ${starter} had stopped)`);
          log.info({ sandbox: id, host: hostName, control_plane: starter }, "finished a stranded start");
        }
        return;
      }
      if ((TERMINAL_STATUSES as readonly string[]).includes(w.status)) {
        return this.end(id, `on host ${hostName}: ${w.status}${w.error_reason ? `: ${w.error_reason}` : ""}`);
      }
      await new Promise<void>((resolve) => setTimeout(resolve, this.deps.pollMs ?? 250));
      // Finished or ended meanwhile (by a peer, a delete, or a starter that was only slow).
      const now = (await store.getSandbox(id))?.status;
      if (!now || !(STARTING as readonly string[]).includes(now)) return;
    }
  }

  /** Ends a row still starting with the reason (conditional: once), and gives its placement back. */
  private async end(id: string, reason: string): Promise<void> {
    const { store, fleet, log } = this.deps;
    const end = errorEnd("START_FAILED", reason);
    if (await store.updateSandbox(id, end, [...STARTING])) {
      await store.addEvent(id, `error: ${reason}`);
      log.warn({ sandbox: id, reason }, "ended a stranded start");
    }
    await fleet.release(id);
  }
}
