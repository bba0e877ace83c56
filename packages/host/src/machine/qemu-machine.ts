import { EventEmitter } from "node:events";
import type { ExecSpec, StatInfo } from "../agent/agent-client.js";
import { resumeAfterSave, saveVmState } from "../snapshots/migration.js";
import type { QemuVm, VmExit } from "../vmm/qemu-vm.js";
import { QmpCommandError, QmpTimeoutError } from "../vmm/qmp-client.js";
import { watchDiskErrors } from "./disk-errors.js";
import { startLiveness } from "./liveness.js";
import {
  type CheckpointRequest,
  type Machine,
  type MachineExec,
  type MachineExit,
  MachineRefusedError,
  MachineTimeoutError,
  type SavedCheckpoint,
  type SuperviseOptions,
} from "./machine.js";
import { checkpointQemu } from "./qemu-checkpoint.js";

/** QMP's answers as the machine's errors: a timeout means QEMU is hung, `QMP Class: desc` a refusal. */
function machineError(err: unknown): unknown {
  if (err instanceof QmpTimeoutError) return new MachineTimeoutError(err.message, { cause: err });
  if (err instanceof QmpCommandError) return new MachineRefusedError(err.message, { cause: err });
  return err;
}

/** A control command's timeout, said as what did not answer. */
function timedOut(err: unknown, what: string): unknown {
  return err instanceof MachineTimeoutError ? new MachineTimeoutError(what, { cause: err }) : err;
}

async function qmpCall<T>(p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (err) {
    throw machineError(err);
  }
}

/** A QEMU microVM as a Machine: QMP for control, the guest agent for exec and files. */
export class QemuMachine extends EventEmitter implements Machine {
  private holds = 0;
  private epoch = 0;
  private paused = false;
  private held: string | undefined;
  private supervised = false;
  /** A memory save left QEMU in `postmigrate`: the next resume waits for that state to settle. */
  private saved = false;
  private readonly stops: Array<() => void> = [];

  /** Each QMP command's deadline where the caller gives none. */
  readonly controlDeadlineMs: number;
  /** What its memory state needs of a machine it loads into (`tcg`, `kvm+nested`), when known. */
  readonly identity: string | null;

  constructor(
    /** The VM behind it (tests reach its agent connection through it). */
    readonly vm: QemuVm,
    opts: { paused?: boolean; controlDeadlineMs?: number; identity?: string | null } = {},
  ) {
    super();
    this.paused = opts.paused ?? false;
    this.controlDeadlineMs = opts.controlDeadlineMs ?? 15_000;
    this.identity = opts.identity ?? null;
    this.setMaxListeners(0);
    vm.on("exit", (exit: VmExit) => {
      for (const stop of this.stops.splice(0)) stop();
      this.held = undefined;
      this.emit("exit", exit);
    });
  }

  get name(): string {
    return this.vm.opts.name;
  }
  get pid(): number {
    return this.vm.pid;
  }
  get exit(): MachineExit | null {
    return this.vm.exit;
  }
  get controllable(): boolean {
    return !this.vm.exit && !!this.vm.qmp && !this.vm.qmp.isClosed;
  }
  get adoptedRunState(): string | undefined {
    return this.vm.adoptedRunState;
  }
  get activeDisk(): string | undefined {
    return this.vm.activeDisk;
  }
  get diskError(): string | undefined {
    return this.held;
  }
  get consoleLog(): string {
    return this.vm.consoleLog;
  }

  exec(spec: ExecSpec): MachineExec {
    return this.vm.agent.exec(spec);
  }
  readFile(path: string, opts: { offset?: number; length?: number; signal?: AbortSignal } = {}): AsyncIterable<Buffer> {
    return this.vm.agent.readFile(path, opts);
  }
  writeFile(
    path: string,
    source: AsyncIterable<Uint8Array>,
    opts: { mode?: number; append?: boolean; signal?: AbortSignal } = {},
  ): Promise<{ bytes: number }> {
    return this.vm.agent.writeFile(path, source, opts);
  }
  stat(path: string): Promise<StatInfo> {
    return this.vm.agent.stat(path);
  }
  list(path: string): Promise<StatInfo[]> {
    return this.vm.agent.list(path);
  }
  mkdir(path: string, opts: { parents?: boolean; mode?: number } = {}): Promise<void> {
    return this.vm.agent.mkdir(path, opts);
  }
  remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    return this.vm.agent.remove(path, opts);
  }
  fsfreeze(path: string): Promise<void> {
    return this.vm.agent.fsfreeze(path);
  }
  fsthaw(path: string): Promise<void> {
    return this.vm.agent.fsthaw(path);
  }
  syncClock(): void {
    this.vm.agent.syncClock();
  }

  private get qmp() {
    const qmp = this.vm.qmp;
    if (!qmp) throw new MachineRefusedError(`${this.name} has no QMP connection`);
    return qmp;
  }

  async pause(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.epoch++;
    this.paused = true;
    const timeoutMs = opts.timeoutMs ?? this.controlDeadlineMs;
    try {
      await qmpCall(() => this.qmp.execute("stop", undefined, { timeoutMs }));
    } catch (err) {
      this.paused = false;
      throw timedOut(err, `QEMU did not answer a pause (QMP stop) within ${timeoutMs} ms`);
    } finally {
      this.epoch++;
    }
  }

  async resume(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.epoch++;
    const timeoutMs = opts.timeoutMs ?? this.controlDeadlineMs;
    try {
      if (this.saved) await qmpCall(() => resumeAfterSave(this.qmp));
      else await qmpCall(() => this.qmp.execute("cont", undefined, { timeoutMs }));
      this.saved = false;
      this.paused = false;
    } catch (err) {
      throw timedOut(err, `QEMU did not answer a resume (QMP cont) within ${timeoutMs} ms`);
    } finally {
      this.epoch++;
    }
  }

  async runState(opts: { timeoutMs: number }): Promise<string | undefined> {
    return this.vm.qmp
      ?.execute<{ status?: string }>("query-status", undefined, { timeoutMs: opts.timeoutMs })
      .then((s) => s.status)
      .catch(() => undefined);
  }

  snapshotDisk(newOverlay: string, opts: { timeoutMs: number }): Promise<string> {
    return qmpCall(() => this.vm.snapshotRootDisk(newOverlay, { timeoutMs: opts.timeoutMs }));
  }

  async saveMemory(file: string, opts: { signal: AbortSignal }): Promise<void> {
    this.saved = true;
    await qmpCall(() =>
      saveVmState(this.qmp, file, { ignoreShared: false, socketDir: this.vm.opts.runDir, signal: opts.signal }),
    );
  }

  checkpoint(req: CheckpointRequest): Promise<SavedCheckpoint> {
    return checkpointQemu(this, req);
  }

  hold(): () => void {
    this.holds++;
    this.epoch++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      this.epoch++;
    };
  }

  supervise(opts: SuperviseOptions): void {
    if (this.supervised || this.vm.exit) return;
    this.supervised = true;
    const ended = () => this.vm.exit !== null;
    const agent = this.vm.agent;
    const violated = (reason: string) => this.emit("protocol-violation", `${reason}; the VM was stopped`);
    agent.on("violation", violated);
    this.stops.push(() => agent.off("violation", violated));
    this.stops.push(
      startLiveness({
        deadlineMs: opts.agentDeadlineMs,
        connection: () => (this.vm.agent && !this.vm.agent.isClosed ? this.vm.agent : null),
        quiet: () => this.holds > 0 || this.paused || this.held !== undefined || (opts.quiet?.() ?? false),
        epoch: () => this.epoch,
        ended,
        onMiss: () => {
          void this.runState({ timeoutMs: 1000 }).then((state) => {
            const secs = Math.round(opts.agentDeadlineMs / 1000);
            this.emit(
              "unresponsive",
              `guest agent stopped answering for ${secs} s (VM state: ${state ?? "no answer"}); the VM was stopped`,
            );
          });
        },
      }),
    );
    const qmp = this.vm.qmp;
    if (qmp) {
      this.stops.push(
        watchDiskErrors({
          qmp,
          ended,
          onError: (reason) => {
            this.held = reason;
            this.epoch++;
            this.emit("disk-error", reason);
          },
          onCleared: () => {
            this.held = undefined;
            this.epoch++;
            this.emit("disk-error-cleared");
          },
        }),
      );
    }
  }

  stop(opts: { graceMs?: number } = {}): Promise<MachineExit> {
    return this.vm.stop(opts);
  }

  forceKill(): void {
    try {
      process.kill(this.vm.pid, "SIGKILL");
    } catch {}
  }
}
<<<<<<< HEAD
=======

export interface QemuMachineHostOptions {
  /** The accelerator machines run under (detectAccel); default `tcg`. */
  accel?: Accel;
  /** Serves MachineSpec.mounts; without it a spec with mounts is refused (NOT_SUPPORTED). */
  volumes?: VolumeFileServer | undefined;
  /** How long the guest may take to mount one volume. */
  mountTimeoutMs?: number;
  /** Each QMP command's deadline (pause, resume, a checkpoint's disk snapshot); default 15 s. */
  controlDeadlineMs?: number;
  /** Each machine in its own cgroup and its tap rate-limited; without it machines run unlimited. */
  limiter?: MachineLimiter | undefined;
}

/** This host's QEMU microVMs. */
export class QemuMachineHost extends QemuDisks implements MachineHost {
  readonly capabilities: HostCapabilities;

  constructor(private readonly opts: QemuMachineHostOptions = {}) {
    super();
    const accel = opts.accel ?? "tcg";
    const nested = nestedSupport(accel);
    this.capabilities = {
      accel,
      memorySnapshots: true,
      nested: nested.ok ? { ok: true } : { ok: false, why: nested.why },
    };
  }

  /** The booted templates and memory images that make starts warm (see WarmCaches). */
  warmCaches(opts: WarmCacheOptions): WarmCaches {
    return qemuWarmCaches(opts);
  }

  private wrap(vm: QemuVm, spec: { accel?: string; nested?: boolean | undefined } | null, paused = false): QemuMachine {
    return new QemuMachine(vm, {
      paused,
      ...(this.opts.controlDeadlineMs !== undefined ? { controlDeadlineMs: this.opts.controlDeadlineMs } : {}),
      identity: spec?.accel ? `${spec.accel}${spec.nested ? "+nested" : ""}` : null,
    });
  }

  /** Exports the mounts to the machine's address (before it runs: a resumed guest's mounts reconnect at once). */
  private async grantMounts(name: string, mounts: VolumeMount[] | undefined, guestNet: string | undefined) {
    if (!mounts?.length) return null;
    if (!guestNet || guestNet === "-") {
      const why = guestNet ? "the sandbox was created with its network off" : "the server runs with networks off";
      throw new SandtreeError("NETWORK_DISABLED", `volumes are mounted over the sandbox's network, and it has none (${why})`);
    }
    const volumes = this.opts.volumes;
    if (!volumes) throw new SandtreeError("NOT_SUPPORTED", "this host does not serve volumes (no volume file server)");
    return volumes.grant(name, guestAddressOf(guestNet), mounts);
  }

  private revokeOnExit(machine: QemuMachine, name: string): void {
    const volumes = this.opts.volumes;
    if (!volumes) return;
    const revoke = () => void volumes.revoke(name).catch(() => {});
    if (machine.exit) revoke();
    else machine.once("exit", revoke);
  }

  async start(spec: MachineSpec): Promise<QemuMachine> {
    const guestMounts = await this.grantMounts(spec.name, spec.mounts, spec.nic?.guestNet);
    let machine: QemuMachine;
    try {
      machine = await this.boot(spec);
    } catch (err) {
      if (guestMounts) await this.opts.volumes?.revoke(spec.name).catch(() => {});
      throw err;
    }
    if (!guestMounts) return machine;
    this.revokeOnExit(machine, spec.name);
    try {
      await mountInGuest(machine, guestMounts, { timeoutMs: this.opts.mountTimeoutMs ?? 60_000 });
    } catch (err) {
      await machine.stop({ graceMs: 0 }).catch(() => {});
      throw err;
    }
    return machine;
  }

  /** The machine's cgroup goes once it exited (adopted ones keep theirs while they run). */
  private releaseOnExit(machine: QemuMachine): void {
    const limiter = this.opts.limiter;
    if (!limiter) return;
    const release = () => void limiter.release(machine.name).catch(() => {});
    if (machine.exit) release();
    else machine.once("exit", release);
  }

  private async boot(spec: MachineSpec): Promise<QemuMachine> {
    const limiter = this.opts.limiter;
    const rates = spec.rates ?? DEFAULT_MACHINE_RATES;
    // The tap's rate goes on while QEMU starts (its `tc` and `ip` processes beside the jail's
    // grants and QEMU's launch), and is in place before the machine is handed out: no program of
    // the sandbox runs before start() returns.
    const rated = limiter && spec.nic ? limiter.limitTap(spec.nic.tap, rates, spec.signal) : Promise.resolve();
    rated.catch(() => {});
    const place = limiter ? { onSpawn: (pid: number) => limiter.place(spec.name, pid, spec, rates) } : {};
    const vm = await QemuVm.start({
      ...place,
      name: spec.name,
      accel: spec.accel,
      cpuCores: spec.cpuCores,
      memoryMb: spec.memoryMb,
      kernel: spec.kernel,
      initramfs: spec.initramfs,
      rootDisk: spec.rootDisk,
      runDir: spec.runDir,
      logDir: spec.logDir,
      ...(spec.nic ? { tap: spec.nic.tap, guestNet: spec.nic.guestNet } : {}),
      ...(spec.nested ? { nested: true } : {}),
      ...(spec.signal ? { signal: spec.signal } : {}),
      ...(spec.template
        ? {
            memoryFile: { path: spec.template.ramFile, share: false },
            restoreFrom: spec.template.stateFile,
            ...(spec.template.rootWait ? { rootWait: true } : {}),
          }
        : {}),
      ...(spec.memoryState ? { restoreFrom: spec.memoryState } : {}),
    }).catch((err: unknown) => {
      if (limiter) void limiter.release(spec.name).catch(() => {});
      throw err;
    });
    try {
      await rated;
    } catch (err) {
      await vm.stop({ graceMs: 0 }).catch(() => {});
      throw err;
    }
    const machine = this.wrap(vm, spec);
    this.releaseOnExit(machine);
    return machine;
  }

  async adopt(spec: AdoptSpec): Promise<QemuMachine> {
    if (spec.mounts?.length) await this.grantMounts(spec.name, spec.mounts, spec.guestNet);
    const vm = await QemuVm.adopt({
      name: spec.name,
      pid: spec.pid,
      runDir: spec.runDir,
      logDir: spec.logDir,
      connectTimeoutMs: spec.deadlineMs,
      keepPaused: spec.keepPaused,
      ...(spec.signal ? { signal: spec.signal } : {}),
      ...(spec.guestNet ? { guestNet: spec.guestNet } : {}),
    });
    // A paused sandbox's VM was stopped again after the handshake.
    const machine = this.wrap(vm, null, spec.keepPaused);
    if (spec.mounts?.length) this.revokeOnExit(machine, spec.name);
    this.releaseOnExit(machine);
    return machine;
  }

  async survivors(runRoot: string): Promise<Array<{ name: string; pid: number }>> {
    return findQemuProcesses(runRoot);
  }

  killSurvivor(pid: number, name: string): void {
    try {
      if (qemuAlive(pid, name)) process.kill(pid, "SIGKILL");
    } catch {}
    void this.opts.limiter?.release(name).catch(() => {});
  }
}
>>>>>>> warmprof
