import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { GuestStatSchema } from "@sandtree/protocol";
import { parseReply } from "../agent/agent-types.js";
import { AgentClosedError } from "../agent/guest-error.js";
import {
  type ExecInput,
  ExecInputSchema,
  type MachineEvent,
  type MachineHostService,
  type MachineInfo,
  type WriteFileInput,
  WriteFileInputSchema,
} from "../gen/sandtree/host/v1/host_pb.js";
import {
  CheckpointFailedError,
  type CheckpointRequest,
  type ExecSpec,
  type Machine,
  type MachineExec,
  type MachineExit,
  MachineRefusedError,
  type SavedCheckpoint,
  type StatInfo,
  type SuperviseOptions,
} from "../machine/machine.js";
import { AsyncQueue } from "../util/async-queue.js";
import { fileRead } from "./file-msgs.js";
import { remoteConnect } from "./remote-connect.js";
import { fromConnectError, remoteCall } from "./remote-errors.js";
import { RemoteExec } from "./remote-exec.js";
import { execSpecMsg, machineExit } from "./remote-specs.js";

type HostClient = Client<typeof MachineHostService>;

/** How long a broken Watch waits before it is opened again: doubling from the first to the most. */
const REWATCH_FIRST_MS = 100;
const REWATCH_MAX_MS = 2000;

/** Waits `ms` (a wait that alone keeps no process alive); false when `life` ended first. */
function pause(ms: number, life: AbortSignal): Promise<boolean> {
  return sleep(ms, true, { signal: life, ref: false }).catch(() => false);
}

/**
 * A machine on a remote host: every call goes to the worker that runs it; its state (exit,
 * active disk, disk error) and events follow the worker's Watch stream, opened again when it
 * breaks (see watch). Only the worker says the machine ended: its exit, or its not knowing it.
 */
export class RemoteMachine extends EventEmitter implements Machine {
  readonly name: string;
  readonly pid: number;
  exit: MachineExit | null = null;
  adoptedRunState: string | undefined;
  activeDisk: string | undefined;
  diskError: string | undefined;
  private quiet: (() => boolean) | undefined;

  constructor(
    private readonly client: HostClient,
    info: MachineInfo,
    private readonly life: AbortSignal,
  ) {
    super();
    this.setMaxListeners(0);
    this.name = info.name;
    this.pid = info.pid;
    this.adoptedRunState = info.adoptedRunState;
    this.activeDisk = info.activeDisk;
    this.diskError = info.diskError;
    void this.watch();
  }

  /**
   * Follows the worker's Watch while this client lives: a stream that breaks or ends without an
   * exit (a reset, a network cut, the worker's service closing its streams) is opened again, the
   * machine running on meanwhile as far as this side knows; the fleet's verdict on a worker gone
   * for good closes the RemoteHost, which ends this loop (no exit: its machines may run on).
   */
  private async watch(): Promise<void> {
    let wait = REWATCH_FIRST_MS;
    while (!this.exit && !this.life.aborted) {
      try {
        for await (const ev of this.client.watch({ name: this.name }, { signal: this.life })) {
          wait = REWATCH_FIRST_MS;
          this.take(ev.event);
        }
      } catch (err) {
        if (this.life.aborted) return;
        const e = fromConnectError(err, "watching the machine");
        // Its first answer says the worker does not know the machine: it ended unwatched long
        // enough ago to be forgotten, or the worker's service that ran it is not this one.
        if (e instanceof MachineRefusedError) {
          this.finish({
            code: null,
            signal: null,
            expected: false,
            reason: `the worker running it no longer knows it (it ended unwatched, or the worker restarted): ${e.message}`,
            guestReset: false,
          });
          return;
        }
      }
      if (this.exit || !(await pause(wait, this.life))) return;
      wait = Math.min(wait * 2, REWATCH_MAX_MS);
    }
  }

  /** One event of the Watch; its first, the machine's state, may say what changed while it was broken. */
  private take(e: MachineEvent["event"]): void {
    if (e.case === "exit") this.finish(machineExit(e.value));
    else if (e.case === "state") this.diskState(e.value.diskError);
    else if (e.case === "unresponsive" && !this.quiet?.()) this.emit("unresponsive", e.value);
    else if (e.case === "protocolViolation") this.emit("protocol-violation", e.value);
    else if (e.case === "diskError") {
      this.diskError = e.value;
      this.emit("disk-error", e.value);
    } else if (e.case === "diskErrorCleared") {
      this.diskError = undefined;
      this.emit("disk-error-cleared");
    }
  }

  /** The disk error the worker answers now: one that began or cleared while no Watch was open is told as its event. */
  private diskState(now: string | undefined): void {
    if (now === this.diskError) return;
    this.diskError = now;
    if (now === undefined) this.emit("disk-error-cleared");
    else this.emit("disk-error", now);
  }

  private finish(exit: MachineExit): void {
    if (this.exit) return;
    this.exit = exit;
    this.emit("exit", exit);
  }

  get controllable(): boolean {
    return this.exit === null;
  }

  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return remoteCall(what, fn);
  }

  /** A call whose answer nobody waits for (the interface's void members). */
  private fire(what: string, fn: () => Promise<unknown>): void {
    fn().catch((err: unknown) => this.emit("remote-error", fromConnectError(err, what)));
  }

  exec(spec: ExecSpec): MachineExec {
    const inputs = new AsyncQueue<ExecInput>();
    inputs.push(create(ExecInputSchema, { input: { case: "spec", value: execSpecMsg(this.name, spec) } }));
    const x = new RemoteExec(inputs);
    if (this.exit) {
      x.close(new MachineRefusedError(`${this.name} has stopped`));
      return x;
    }
    void (async () => {
      try {
        for await (const o of this.client.exec(inputs, { signal: this.life })) x.take(o);
        x.close(new AgentClosedError("the worker ended the command's stream before its exit"));
      } catch (err) {
        x.close(fromConnectError(err, "a command"));
      }
    })();
    return x;
  }

  async connect(port: number, opts: { signal?: AbortSignal } = {}): Promise<Duplex> {
    if (this.exit) throw new MachineRefusedError(`${this.name} has stopped`);
    return remoteConnect(this.client, this.name, port, { signal: opts.signal, life: this.life });
  }

  async *readFile(path: string, opts: { offset?: number; length?: number; signal?: AbortSignal } = {}): AsyncIterable<Buffer> {
    const req = { machine: this.name, file: fileRead(path, opts) };
    try {
      for await (const c of this.client.readFile(req, opts.signal ? { signal: opts.signal } : {})) yield Buffer.from(c.data);
    } catch (err) {
      throw fromConnectError(err, `reading ${path}`);
    }
  }

  writeFile(
    path: string,
    source: AsyncIterable<Uint8Array>,
    opts: { mode?: number; append?: boolean; signal?: AbortSignal } = {},
  ): Promise<{ bytes: number }> {
    const name = this.name;
    async function* inputs(): AsyncIterable<WriteFileInput> {
      const header = {
        machine: name,
        path,
        append: opts.append === true,
        ...(opts.mode !== undefined ? { mode: opts.mode } : {}),
      };
      yield create(WriteFileInputSchema, { input: { case: "header", value: header } });
      for await (const data of source) yield create(WriteFileInputSchema, { input: { case: "data", value: data } });
    }
    return this.call(`writing ${path}`, async () => {
      const r = await this.client.writeFile(inputs(), opts.signal ? { signal: opts.signal } : {});
      return { bytes: Number(r.bytes) };
    });
  }

  stat(path: string): Promise<StatInfo> {
    return this.call(`stat of ${path}`, async () =>
      parseReply(GuestStatSchema, Buffer.from((await this.client.stat({ machine: this.name, path })).json), "stat"),
    );
  }

  list(path: string): Promise<StatInfo[]> {
    return this.call(`listing ${path}`, async () =>
      (await this.client.list({ machine: this.name, path })).entries.map((e) =>
        parseReply(GuestStatSchema, Buffer.from(e.json), "list"),
      ),
    );
  }

  async mkdir(path: string, opts: { parents?: boolean; mode?: number } = {}): Promise<void> {
    const req = {
      machine: this.name,
      dir: { path, parents: opts.parents === true, ...(opts.mode !== undefined ? { mode: opts.mode } : {}) },
    };
    await this.call(`mkdir ${path}`, () => this.client.mkdir(req));
  }

  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.call(`removing ${path}`, () =>
      this.client.remove({ machine: this.name, file: { path, recursive: opts.recursive === true } }),
    );
  }

  syncClock(): void {
    this.fire("setting the guest clock", () => this.client.syncClock({ name: this.name }));
  }

  async pause(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.call("pause", () => this.client.pause({ machine: this.name, ...opts }));
  }

  async resume(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.call("resume", () => this.client.resume({ machine: this.name, ...opts }));
  }

  async runState(opts: { timeoutMs: number }): Promise<string | undefined> {
    if (this.exit) return undefined;
    try {
      return (await this.client.runState({ machine: this.name, timeoutMs: opts.timeoutMs }, { timeoutMs: opts.timeoutMs + 5000 }))
        .state;
    } catch {
      return undefined;
    }
  }

  async checkpoint(req: CheckpointRequest): Promise<SavedCheckpoint> {
    if (this.exit) throw new CheckpointFailedError(`${this.name} has stopped`, null);
    const saved = await this.call("a checkpoint", () =>
      this.client.checkpoint({
        machine: this.name,
        nextDisk: req.nextDisk,
        diskSizeBytes: BigInt(req.diskSizeBytes),
        freezeDeadlineMs: req.freezeDeadlineMs,
        ...(req.memoryFile !== undefined ? { memoryFile: req.memoryFile } : {}),
      }),
    );
    this.activeDisk = saved.activeDisk ?? req.nextDisk;
    return { layer: saved.layer, memoryState: saved.memoryState ?? null, machine: saved.machine ?? null };
  }

  hold(): () => void {
    const hold = randomUUID();
    this.fire("holding the watchdog", () => this.client.hold({ machine: this.name, hold }));
    return () => this.fire("releasing the watchdog", () => this.client.release({ machine: this.name, hold }));
  }

  supervise(opts: SuperviseOptions): void {
    this.quiet = opts.quiet;
    this.fire("supervising", () => this.client.supervise({ machine: this.name, agentDeadlineMs: opts.agentDeadlineMs }));
  }

  async stop(opts: { graceMs?: number } = {}): Promise<MachineExit> {
    if (this.exit) return this.exit;
    const exit = machineExit(await this.call("stop", () => this.client.stop({ machine: this.name, ...opts })));
    this.finish(exit);
    return this.exit ?? exit;
  }

  forceKill(): void {
    this.fire("killing the machine", () => this.client.forceKill({ name: this.name }));
  }
}
