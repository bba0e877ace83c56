import { EventEmitter } from "node:events";
import { rmSync } from "node:fs";
import { type Machine, type MachineExit, type MachineHost, MachineTimeoutError } from "@sandtree/host";
import { type SandboxStatus, SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "./error-end.js";
import { liveDiskName, machineNameOf, type SandboxPaths } from "./sandbox-paths.js";

/** Statuses with a VM (or one on its way). PAUSED keeps its VM but counts toward no quota. */
export const ACTIVE: readonly SandboxStatus[] = ["PENDING", "PROVISIONING", "RUNNING", "PAUSED"];

export interface SandboxMachinesDeps {
  store: Store;
  /** Where the machines run (it removes what one left in its run directory: discard). */
  host: MachineHost;
  paths: SandboxPaths;
  log: Logger;
  network?: NetworkService;
  /** The liveness watchdog's deadline (ms; 0 turns it off). */
  agentDeadlineMs: number;
  /**
   * The name (in the fleet) of a host that lives apart from this process (a worker's): a machine it
   * stops by itself (its shutdown) ends its sandbox TERMINATED, "on host NAME: the server shut
   * down". Absent: this process's own host, which stops machines only when asked.
   */
  stopsByItself?: string;
}

/**
 * The machine of every sandbox on this host and what their supervision reports: a machine that
 * dies makes its sandbox ERROR with the reason; one that stops answering is failed and killed;
 * one held on a host disk error is recorded (new calls get 507 HOST_DISK_FULL meanwhile).
 */
export class SandboxMachines {
  private readonly machines = new Map<string, Machine>();
  /** Sandboxes whose machine is being replaced by a reset (the network stays). */
  readonly resetting = new Set<string>();
  /** Emits ("io-error", sandboxId, reason) when a machine is held on a host disk error. */
  readonly ioEvents = new EventEmitter().setMaxListeners(0);

  /** The last status of each supervised sandbox (the watchdog's quiet check cannot wait on the store). */
  private readonly statuses = new Map<string, SandboxStatus>();

  constructor(private readonly deps: SandboxMachinesDeps) {
    deps.store.onSandboxStatus((id, patch) => {
      if (patch.status && this.statuses.has(id)) this.statuses.set(id, patch.status);
    });
  }

  get(id: string): Machine | undefined {
    return this.machines.get(id);
  }
  has(id: string): boolean {
    return this.machines.has(id);
  }
  ids(): string[] {
    return [...this.machines.keys()];
  }
  /** Forgets the sandbox's machine (calls meanwhile get 409) and returns it. */
  take(id: string): Machine | undefined {
    const m = this.machines.get(id);
    this.machines.delete(id);
    this.statuses.delete(id);
    return m;
  }

  /** Tracks a sandbox's machine (its sandbox now in `status`) and starts its supervision. */
  supervise(id: string, machine: Machine, status: SandboxStatus): void {
    this.machines.set(id, machine);
    this.statuses.set(id, status);
    const current = () => this.machines.get(id) === machine;
    machine.on("exit", (exit: MachineExit) => {
      const untaken = current();
      if (untaken) {
        this.machines.delete(id);
        this.statuses.delete(id);
      }
      // Stopped on purpose though nobody here took it: its host shut down.
      if (exit.expected && untaken && this.deps.stopsByItself) void this.recordHostStop(id, this.deps.stopsByItself);
      else void this.recordExit(id, exit);
    });
    this.watch(id, machine, current);
    machine.supervise({
      agentDeadlineMs: this.deps.agentDeadlineMs,
      quiet: () => this.statuses.get(id) !== "RUNNING",
    });
  }

  /** A machine its host (living apart) stopped as it shut down: the sandbox ends TERMINATED with that reason. Never rejects. */
  private async recordHostStop(id: string, host: string): Promise<void> {
    const reason = `on host ${host}: the server shut down`;
    const end = { status: "TERMINATED" as const, error_reason: reason, terminated_at: new Date().toISOString() };
    try {
      if (await this.deps.store.updateSandbox(id, end, ACTIVE)) await this.deps.store.addEvent(id, `TERMINATED ${reason}`);
    } catch (err) {
      this.deps.log.error({ sandbox: id, err: (err as Error).message }, "could not record the host's stop");
    }
    void this.deps.network?.detach(id).catch(() => {});
  }

  /** An unexpected exit makes the sandbox ERROR; its disk and sockets go. Never rejects. */
  private async recordExit(id: string, exit: MachineExit): Promise<void> {
    const { store, log } = this.deps;
    if (exit.expected) return;
    log.warn({ sandbox: id, reason: exit.reason }, "sandbox VM died");
    try {
      const end = errorEnd(exit.guestReset ? "GUEST_RESET" : "MACHINE_EXITED", exit.reason);
      if (await store.updateSandbox(id, end, ACTIVE)) {
        await store.addEvent(id, `error: ${exit.reason}`);
      }
    } catch (err) {
      // The database cannot write (host disk full): a restart's reconcile finds the VM gone.
      log.error({ sandbox: id, err: (err as Error).message }, "could not record the VM's death");
    }
    await this.cleanupDisk(id).catch((err: Error) => log.warn({ sandbox: id, err: err.message }, "could not clean up a disk"));
    await this.discard(id);
    // A reset replaces the VM and keeps the network; a VM that died on its own gives it back.
    if (!this.resetting.has(id)) void this.deps.network?.detach(id).catch(() => {});
  }

  /** The machine's liveness and host disk-error reports. */
  private watch(id: string, machine: Machine, current: () => boolean): void {
    const { log } = this.deps;
    machine.on("unresponsive", (reason: string) => {
      if (current()) void this.failVm(id, machine, reason);
    });
    // Only a replaced agent breaks the protocol: root in the guest did it, so the VM goes.
    machine.on("protocol-violation", (reason: string) => {
      if (current()) void this.failVm(id, machine, reason);
    });
    let pausedAt = "";
    let heldFor = "";
    let recorded = false;
    /** The disk-error events, recorded in order (eventSafely never rejects). */
    let events: Promise<void> = Promise.resolve();
    machine.on("disk-error", (reason: string) => {
      if (!current()) return;
      this.ioEvents.emit("io-error", id, reason);
      log.warn({ sandbox: id, reason }, "sandbox VM paused on a host disk error");
      pausedAt = new Date().toISOString();
      heldFor = reason;
      const pause = this.eventSafely(id, `paused: ${reason}; it runs on once the host has space`);
      events = pause.then((ok) => {
        recorded = ok;
      });
    });
    machine.on("disk-error-cleared", () => {
      events = events.then(async () => {
        // The pause itself could not be recorded while the disk was full: say so now.
        if (!recorded) await this.eventSafely(id, `paused from ${pausedAt}: ${heldFor}`);
        await this.eventSafely(id, "running again after the host disk error");
      });
      log.info({ sandbox: id }, "sandbox VM resumed after a host disk error");
    });
  }

  /** Why the sandbox's machine is held on a host disk error, or undefined. */
  ioErrorOf(id: string): string | undefined {
    return this.machines.get(id)?.diskError;
  }

  /** Tells the watchdog the guest is held still on purpose until the returned function is called. */
  holdWatchdog(id: string): () => void {
    return this.machines.get(id)?.hold() ?? (() => {});
  }

  /** An event row, when the database can take one (the host disk may be full). */
  async eventSafely(id: string, message: string): Promise<boolean> {
    try {
      await this.deps.store.addEvent(id, message);
      return true;
    } catch (err) {
      this.deps.log.warn({ sandbox: id, event: message, err: (err as Error).message }, "could not record a sandbox event");
      return false;
    }
  }

  /** Marks a RUNNING sandbox ERROR with the reason and kills its machine (the exit handler cleans up). */
  async failVm(id: string, machine: Machine, reason: string, from: readonly SandboxStatus[] = ["RUNNING"]): Promise<void> {
    const { store, log } = this.deps;
    try {
      if (!(await store.updateSandbox(id, errorEnd("MACHINE_UNRESPONSIVE", reason), from))) return;
    } catch (err) {
      // Not recorded (disk full?): leave the VM; the watchdog or a later call tries again.
      log.error({ sandbox: id, reason, err: (err as Error).message }, "could not mark the sandbox ERROR");
      return;
    }
    await this.eventSafely(id, `error: ${reason}`);
    log.warn({ sandbox: id, reason }, "sandbox VM failed");
    machine.forceKill();
  }

  /**
   * A pause or resume under the host's control deadline. The VMM serves its control channel whatever the
   * guest does, so no answer in time means it is stopped or hung: the sandbox becomes ERROR and
   * its machine is killed, and the caller gets 502 GUEST_ERROR with the reason (never a call
   * that hangs).
   */
  async control(id: string, machine: Machine, op: "pause" | "resume"): Promise<void> {
    if (!machine.controllable && !machine.exit)
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} has no control connection to its machine`, { id });
    // The call's own deadline decides (the liveness watchdog stands aside meanwhile).
    const release = machine.hold();
    try {
      await machine[op]();
    } catch (err) {
      const what = op === "pause" ? "a pause" : "a resume";
      if (err instanceof MachineTimeoutError) {
        const reason = `${err.message}; the VM was killed`;
        await this.failVm(id, machine, reason, ["RUNNING", "PAUSED"]);
        throw new SandtreeError("GUEST_ERROR", `sandbox ${id}: ${reason}`, { id });
      }
      if (machine.exit || !machine.controllable) {
        const why = (await this.deps.store.getSandbox(id))?.error_reason ?? machine.exit?.reason ?? "its VM stopped";
        throw new SandtreeError("GUEST_ERROR", `sandbox ${id}: ${what} failed: ${why}`, { id });
      }
      throw err;
    } finally {
      release();
    }
  }

  /** Has the host remove what the sandbox's machine left in its run directory (sockets). Never rejects. */
  async discard(id: string): Promise<void> {
    await this.deps.host
      .discard(machineNameOf(id))
      .catch((err: Error) => this.deps.log.warn({ sandbox: id, err: err.message }, "could not remove a machine's run directory"));
  }

  /** Removes the sandbox's disk files except layers that checkpoints still own. Idempotent. */
  async cleanupDisk(id: string): Promise<void> {
    const { paths } = this.deps;
    rmSync(paths.diskDir(id), { recursive: true, force: true });
    const owned = new Set((await this.deps.store.listCheckpoints({ sandboxId: id })).map((c) => c.blob_key));
    for (const f of await this.deps.host.listLayers(liveDiskName(id, ""))) {
      if (!owned.has(f)) await this.deps.host.removeLayer(f);
    }
  }
}
