import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type { MachineHost } from "@sandtree/host";
import type { Sandbox } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "./error-end.js";
import { ACTIVE, type SandboxMachines } from "./sandbox-machines.js";
import { machineNameOf, type SandboxPaths } from "./sandbox-paths.js";

/** A sandbox's machine (machineNameOf), not one of the host's own (a warm template's). */
const SANDBOX_MACHINE = /^sandtree-sb-[a-z2-7]+$/;

export interface ReconcilerDeps {
  store: Store;
  host: MachineHost;
  machines: SandboxMachines;
  paths: SandboxPaths;
  log: Logger;
  network?: NetworkService;
  /** One adoption, all steps (ms). */
  adoptDeadlineMs: number;
  /** Sandboxes this process is provisioning (they are not lost). */
  provisioning: (id: string) => boolean;
  closing: () => boolean;
  /** Sandboxes placed on other hosts (fleet workers): their machines are there, not here. */
  placedElsewhere: () => Promise<Set<string>>;
}

export interface ReconcileOptions {
  /**
   * On a store several servers share: the sandboxes placed on this server's own host. Only
   * those (and any whose VM survives in this server's run directory) are this server's to adopt or
   * mark lost; the others belong to other servers. Null or absent: every active sandbox is ours.
   */
  placedHere?: ReadonlySet<string> | null;
  /**
   * On a worker's host several control planes share: the sandboxes placed there by others (peers,
   * admins). Their machines, disks and records are theirs: neither adopted, killed nor removed here.
   * Read after the host's machines are (a placement is recorded before its machine starts).
   */
  leave?: () => Promise<ReadonlySet<string>>;
}

export interface ReconcileResult {
  settled: Promise<void>;
  /** The active sandboxes this server took as its own (null: all of them, a store of its own). */
  owned: ReadonlySet<string> | null;
}

/**
 * After a restart: finds the machines that survived the previous server process and adopts them
 * again, marks the sandboxes whose machine is gone ERROR with the reason, kills machines nobody
 * will adopt, and removes what the previous process left on disk for sandboxes without a machine.
 */
export class Reconciler {
  /** Sandboxes whose surviving machine is being reconnected. */
  readonly adopting = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(private readonly deps: ReconcilerDeps) {}

  private async cleanup(id: string): Promise<void> {
    await this.deps.machines.cleanupDisk(id);
    await this.deps.machines.discard(id);
  }

  private async lose(sb: Sandbox, reason: string): Promise<unknown> {
    const { store, log } = this.deps;
    // Its leftovers go first, so a sandbox seen ERROR has nothing left behind.
    await this.cleanup(sb.id);
    if (await store.updateSandbox(sb.id, errorEnd("RESTART_LOST", reason), ACTIVE)) {
      await store.addEvent(sb.id, `error: ${reason}`);
      log.warn({ sandbox: sb.id, reason }, "sandbox lost in a restart");
    }
    return this.deps.network?.detach(sb.id).catch(() => {}) ?? Promise.resolve();
  }

  /**
   * Its decisions are taken synchronously, before the server listens: which sandboxes have a
   * surviving machine to adopt (a VMM runs in its own process group), which are lost (caught
   * `PENDING`/`PROVISIONING`, or their machine is gone: `ERROR` with the reason), which machines
   * nobody will adopt (killed at once). The adoptions then run in parallel in the background
   * while the API answers, each under one deadline for all its steps: one that misses it or
   * fails gets its machine killed and its sandbox `ERROR` with the reason, so a frozen VM holds
   * up nothing else. It resolves once the decisions are taken (await it before listening);
   * `settled` settles when every adoption has.
   */
  async reconcile(opts: ReconcileOptions = {}): Promise<ReconcileResult> {
    const { store, log, machines, paths, host } = this.deps;
    const found = new Map((await host.survivors()).map((p) => [p.name, p.pid]));
    const here = opts.placedHere ?? null;
    const leave = (await opts.leave?.()) ?? new Set<string>();
    const listed = (await store.listSandboxesByStatus(ACTIVE)).filter(
      (sb) => !leave.has(sb.id) && (here === null || here.has(sb.id) || found.has(machineNameOf(sb.id))),
    );
    const elsewhere = await this.deps.placedElsewhere();
    // A RUNNING or PAUSED sandbox placed elsewhere lives on there; one this process was still starting is lost.
    const livesElsewhere = (sb: Sandbox) => elsewhere.has(sb.id) && (sb.status === "RUNNING" || sb.status === "PAUSED");
    const active = listed.filter((sb) => !machines.has(sb.id) && !this.deps.provisioning(sb.id) && !livesElsewhere(sb));
    const settled: Array<Promise<unknown>> = [];
    // A lost sandbox is ERROR with nothing of it left (disk, tap, rules) before the API answers:
    // a client that saw the restart must not find it RUNNING, nor its address still routed.
    const losses: Array<Promise<unknown>> = [];
    for (const sb of active) {
      const pid = found.get(machineNameOf(sb.id));
      if (sb.status !== "RUNNING" && sb.status !== "PAUSED")
        losses.push(this.lose(sb, `the server restarted while provisioning the sandbox (${sb.status})`));
      else if (pid === undefined) losses.push(this.lose(sb, "the server restarted and the sandbox's VM was gone"));
      else {
        const abort = new AbortController();
        const done = this.adoptOne(sb, pid, abort.signal)
          .then(async (reason) => {
            if (reason !== null) await this.lose(sb, reason);
          })
          .catch((err: Error) => log.error({ sandbox: sb.id, err: err.message }, "adoption failed"))
          .finally(() => this.adopting.delete(sb.id));
        this.adopting.set(sb.id, { abort, done });
        settled.push(done);
      }
    }
    // What the previous server left for sandboxes without a machine (a crash between creating
    // the disk and starting the machine leaves only a layer file; a killed machine, its sockets
    // on its host); a failed adoption cleans its own.
    const ids = new Set<string>();
    // Machines nobody adopts (of ERROR sandboxes, of deletes or provisionings a crash interrupted): killed now.
    for (const [name, pid] of found) {
      const id = name.replace(/^sandtree-/, "");
      if (this.adopting.has(id) || machines.has(id) || leave.has(id)) continue;
      host.killSurvivor(pid, name);
      if (SANDBOX_MACHINE.test(name)) ids.add(id);
    }
    const sandboxesDir = path.join(paths.dataDir, "sandboxes");
    if (existsSync(sandboxesDir)) for (const id of readdirSync(sandboxesDir)) ids.add(id);
    for (const f of await host.listLayers("live-")) {
      const m = /^live-(sb-[a-z2-7]+)-/.exec(f);
      if (m?.[1]) ids.add(m[1]);
    }
    await Promise.all(losses);
    const cleanups: Array<Promise<void>> = [];
    for (const id of ids) {
      if (machines.has(id) || this.deps.provisioning(id) || this.adopting.has(id) || machines.resetting.has(id) || leave.has(id))
        continue;
      cleanups.push(this.cleanup(id));
    }
    await Promise.all(cleanups);
    return {
      settled: Promise.all(settled).then(() => undefined),
      owned: here === null ? null : new Set(listed.map((sb) => sb.id)),
    };
  }

  /** Adopts one surviving machine; null when it is supervised now, else why it was not (it is killed). */
  private async adoptOne(sb: Sandbox, pid: number, signal: AbortSignal): Promise<string | null> {
    const { store, log } = this.deps;
    try {
      const guestNet = this.deps.network?.guestNetOf(sb.id);
      const machine = await this.deps.host.adopt({
        name: machineNameOf(sb.id),
        pid,
        deadlineMs: this.deps.adoptDeadlineMs,
        signal,
        ...(guestNet ? { guestNet } : {}),
        // A PAUSED sandbox stays paused (its guest runs only for the handshake); a RUNNING one
        // whose VM was found stopped (a crash mid-pause or mid-checkpoint) runs on.
        keepPaused: sb.status === "PAUSED",
      });
      // Deleted, expired or shut down meanwhile: the adoption's result is not wanted.
      const now = (await store.getSandbox(sb.id))?.status;
      if (this.deps.closing() || (now !== "RUNNING" && now !== "PAUSED")) {
        await machine.stop({ graceMs: 0 }).catch(() => {});
        return `the sandbox ended (${now ?? "gone"}) while its VM was being reconnected`;
      }
      this.deps.machines.supervise(sb.id, machine, now);
      const state = machine.adoptedRunState === "running" ? "" : `; its VM was ${machine.adoptedRunState}`;
      await store.addEvent(sb.id, `adopted after a server restart (pid ${pid}${state})`);
      log.info({ sandbox: sb.id, pid, runState: machine.adoptedRunState, status: sb.status }, "sandbox VM adopted");
      return null;
    } catch (err) {
      return `the server restarted and the sandbox's VM did not answer: ${(err as Error).message}`;
    }
  }
}
