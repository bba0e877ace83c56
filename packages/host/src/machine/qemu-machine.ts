import { EventEmitter } from "node:events";
import nodePath from "node:path";
import type { Duplex } from "node:stream";
import type { ExecSpec, StatInfo } from "../agent/agent-client.js";
import { resumeAfterSave, saveVmState } from "../snapshots/migration.js";
import type { QemuVm, VmExit } from "../vmm/qemu-vm.js";
import { QmpCommandError, QmpTimeoutError } from "../vmm/qmp-client.js";
import { watchDiskErrors } from "./disk-errors.js";
import { dialGuestPort, guestPortAddress } from "./guest-port.js";
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
  /** eth0's configuration ("ADDR/PREFIX GATEWAY", "-": link down), undefined without a NIC. */
  private readonly guestNet: string | undefined;
  /** Its host's layers directory: where its disks lie, named there (checkpoints name the next one). */
  readonly layersDir: string;

  constructor(
    /** The VM behind it (tests reach its agent connection through it). */
    readonly vm: QemuVm,
    opts: {
      paused?: boolean;
      controlDeadlineMs?: number;
      identity?: string | null;
      guestNet?: string | undefined;
      layersDir: string;
    },
  ) {
    super();
    this.paused = opts.paused ?? false;
    this.controlDeadlineMs = opts.controlDeadlineMs ?? 15_000;
    this.identity = opts.identity ?? null;
    this.guestNet = opts.guestNet;
    this.layersDir = opts.layersDir;
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
  /** Its disk's name in the layers directory (QEMU names the file). */
  get activeDisk(): string | undefined {
    const file = this.vm.activeDisk;
    return file === undefined ? undefined : nodePath.basename(file);
  }
  get startMarks(): Readonly<Record<string, number>> | undefined {
    return this.vm.startMarks;
  }
  get diskError(): string | undefined {
    return this.held;
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
  /** A TCP connection to the guest's address on its tap (this host reaches it directly). */
  async connect(port: number, opts: { signal?: AbortSignal } = {}): Promise<Duplex> {
    if (this.vm.exit) throw new MachineRefusedError(`${this.name} has stopped`);
    return dialGuestPort(guestPortAddress(this.name, this.guestNet), port, opts);
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
