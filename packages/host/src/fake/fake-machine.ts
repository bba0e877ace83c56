import { EventEmitter } from "node:events";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Duplex } from "node:stream";
import { FrameType } from "@sandtree/protocol";
import { AgentExec } from "../agent/agent-exec.js";
import type { ExecSpec, StatInfo } from "../agent/agent-types.js";
import { GuestError } from "../agent/guest-error.js";
import { guestPortAddress } from "../machine/guest-port.js";
import {
  CheckpointFailedError,
  type CheckpointRequest,
  type Machine,
  type MachineExec,
  type MachineExit,
  MachineRefusedError,
  type SavedCheckpoint,
} from "../machine/machine.js";
import { encodeFiles, type FakeDisks, filesOf, readDiskFile, writeDiskFile } from "./fake-disks.js";
import { FakeFiles } from "./fake-files.js";
import { FakePorts } from "./fake-ports.js";
import { runFakeCommand } from "./fake-shell.js";

/** Files here are the machine's memory: kept by a memory checkpoint, lost by a disk-only start. */
const MEMORY_DIR = "/dev/shm/";

let nextPid = 1_000_000;

function withoutMemory(files: Map<string, Buffer>): Map<string, Buffer> {
  return new Map([...files].filter(([k]) => !k.startsWith(MEMORY_DIR)));
}

/** A machine of the fake host: a file map, a tiny shell, no VM. */
export class FakeMachine extends EventEmitter implements Machine {
  readonly pid = nextPid++;
  exit: MachineExit | null = null;
  adoptedRunState: string | undefined;
  activeDisk: string | undefined;
  readonly diskError: string | undefined = undefined;
  private readonly consoleLog: string;
  readonly files: FakeFiles;
  private paused = false;
  private readonly waiting: Array<() => void> = [];
  private streams = 0;
  private readonly ports = new FakePorts();
  private readonly guestNet: string | undefined;
  private readonly disks: FakeDisks;

  /** `runDir`: its pid file, removed by a stop (a kill leaves it, as a VM's); `logDir`: its console log, kept. */
  constructor(
    readonly name: string,
    private readonly runDir: string,
    opts: {
      /** Its host's disks: checkpoints name files in their layers directory. */
      disks: FakeDisks;
      /** Its root disk's and memory state's files. */
      rootDisk: string;
      logDir: string;
      memoryState?: string | undefined;
      guestNet?: string | undefined;
    },
  ) {
    super();
    this.guestNet = opts.guestNet;
    this.setMaxListeners(0);
    this.disks = opts.disks;
    this.activeDisk = path.basename(opts.rootDisk);
    mkdirSync(opts.logDir, { recursive: true });
    mkdirSync(runDir, { recursive: true });
    writeFileSync(path.join(runDir, "fake.pid"), `${this.pid}\n`);
    this.consoleLog = path.join(opts.logDir, "console.log");
    writeFileSync(this.consoleLog, `fake machine ${name} started\n`);
    const files = opts.memoryState ? filesOf(opts.memoryState) : withoutMemory(filesOf(opts.rootDisk));
    this.files = new FakeFiles(files);
  }

  get controllable(): boolean {
    return this.exit === null;
  }

  private alive(): void {
    if (this.exit) throw new MachineRefusedError(`${this.name} has stopped`);
  }

  /** Runs `fn` once the machine is not paused (a paused guest does nothing). */
  private whenRunning(fn: () => void): void {
    if (this.paused) this.waiting.push(fn);
    else fn();
  }

  exec(spec: ExecSpec): MachineExec {
    const stream = ++this.streams;
    const frame = (type: number, payload: Buffer) => x.handle({ type, flags: 0, stream, payload });
    const atFinish: Array<() => void> = [];
    let finished = false;
    const finish = (exit_code: number, signal: number | null) => {
      if (finished) return;
      finished = true;
      for (const fn of atFinish.splice(0)) fn();
      frame(FrameType.EXIT, Buffer.from(JSON.stringify({ exit_code, signal, timed_out: false })));
    };
    // With stdin, the command runs once stdin is closed, on all it was sent (each chunk's credit handed back).
    const stdin: Buffer[] = [];
    let stdinOpen = spec.stdin === true;
    let run: (() => void) | null = null;
    const x = new AgentExec(
      {
        sendRaw: (type) => {
          // Any signal ends the command as SIGTERM would.
          if (type === FrameType.SIGNAL) finish(143, 15);
          if (type === FrameType.STDIN_CLOSE && stdinOpen) {
            stdinOpen = false;
            run?.();
          }
          return true;
        },
        sendData: async (type, _stream, payload) => {
          if (type !== FrameType.STDIN || !stdinOpen) return;
          stdin.push(Buffer.from(payload));
          const credit = Buffer.alloc(4);
          credit.writeUInt32LE(payload.length);
          setImmediate(() => frame(FrameType.WINDOW, credit));
        },
        sendWindow: () => {},
      },
      stream,
    );
    if (this.exit) {
      x.close(new MachineRefusedError(`${this.name} has stopped`));
      return x;
    }
    setImmediate(() =>
      this.whenRunning(() => {
        frame(FrameType.STARTED, Buffer.from(JSON.stringify({ pid: 100 + stream })));
        run = () => this.runCommand(spec, Buffer.concat(stdin), frame, finish, (fn) => atFinish.push(fn));
        if (!stdinOpen) run();
      }),
    );
    return x;
  }

  private runCommand(
    spec: ExecSpec,
    stdin: Buffer,
    frame: (type: number, payload: Buffer) => void,
    finish: (code: number, signal: number | null) => void,
    atFinish: (fn: () => void) => void,
  ): void {
    let r: ReturnType<typeof runFakeCommand>;
    try {
      r = runFakeCommand(spec, this.files, stdin);
    } catch (err) {
      r = { stdout: "", stderr: `${(err as Error).message}\n`, code: 1, sleepMs: 0, poweroff: false };
    }
    if (r.stdout) frame(FrameType.STDOUT, Buffer.from(r.stdout));
    if (r.stderr) frame(FrameType.STDERR, Buffer.from(r.stderr));
    if (r.listen !== undefined) {
      // A listener runs until it is signalled (or the machine ends).
      atFinish(this.ports.listen(r.listen));
    } else if (r.sleepMs > 0) {
      const timer = setTimeout(() => finish(r.code, null), r.sleepMs);
      atFinish(() => clearTimeout(timer));
    } else finish(r.code, null);
    if (r.poweroff) this.end(false, "the guest powered off", true);
  }

  async *readFile(p: string, opts: { offset?: number; length?: number } = {}): AsyncIterable<Buffer> {
    this.alive();
    if (this.files.stat(p).type === "dir") throw new GuestError("EISDIR", 21, `${p}: Is a directory`);
    const data = this.files.read(p) ?? Buffer.alloc(0);
    const start = opts.offset ?? 0;
    yield data.subarray(start, opts.length !== undefined ? start + opts.length : undefined);
  }

  async writeFile(p: string, source: AsyncIterable<Uint8Array>, opts: { append?: boolean } = {}): Promise<{ bytes: number }> {
    this.alive();
    const chunks: Buffer[] = [];
    for await (const c of source) chunks.push(Buffer.from(c));
    const data = Buffer.concat(chunks);
    this.files.write(p, data, opts.append === true);
    return { bytes: data.length };
  }

  async stat(p: string): Promise<StatInfo> {
    this.alive();
    return this.files.stat(p);
  }
  async list(p: string): Promise<StatInfo[]> {
    this.alive();
    return this.files.list(p);
  }
  async mkdir(p: string, opts: { parents?: boolean } = {}): Promise<void> {
    this.alive();
    this.files.mkdir(p, opts.parents === true);
  }
  async remove(p: string, opts: { recursive?: boolean } = {}): Promise<void> {
    this.alive();
    this.files.remove(p, opts.recursive === true);
  }
  syncClock(): void {}

  /** An in-memory connection to what a command listens on (`nc -l -p PORT -e cat`); a paused machine answers once resumed. */
  async connect(port: number): Promise<Duplex> {
    this.alive();
    guestPortAddress(this.name, this.guestNet);
    await new Promise<void>((r) => this.whenRunning(r));
    this.alive();
    return this.ports.connect(port);
  }

  async pause(): Promise<void> {
    this.alive();
    this.paused = true;
  }
  async resume(): Promise<void> {
    this.alive();
    this.paused = false;
    for (const fn of this.waiting.splice(0)) fn();
  }
  async runState(): Promise<string | undefined> {
    if (this.exit) return undefined;
    return this.paused ? "paused" : "running";
  }

  /** Writes the file map into the active disk (it becomes the layer) and goes on on `nextDisk`. */
  async checkpoint(req: CheckpointRequest): Promise<SavedCheckpoint> {
    if (this.exit) throw new CheckpointFailedError(`${this.name} has stopped`, null);
    const layer = this.activeDisk;
    if (!layer) throw new CheckpointFailedError("this machine has no disk to checkpoint", null);
    const memoryFile = req.memoryFile === undefined ? undefined : this.disks.file(req.memoryFile, "memoryFile");
    this.disks.file(req.nextDisk, "nextDisk");
    const layerFile = this.disks.file(layer, "layer");
    const header = readDiskFile(layerFile);
    try {
      await this.disks.createDisk(layer, req.nextDisk, req.diskSizeBytes);
      writeDiskFile(layerFile, {
        fake: 1,
        backing: header?.backing ?? null,
        files: encodeFiles(withoutMemory(this.files.files)),
      });
      if (memoryFile) writeDiskFile(memoryFile, { fake: 1, backing: null, files: encodeFiles(this.files.files) });
    } catch (err) {
      throw new CheckpointFailedError((err as Error).message, null, { cause: err });
    }
    this.activeDisk = req.nextDisk;
    return { layer, memoryState: req.memoryFile ?? null, machine: "fake" };
  }

  hold(): () => void {
    return () => {};
  }
  supervise(): void {}

  private end(expected: boolean, reason: string, guestReset = false): MachineExit {
    if (!this.exit) {
      const code = expected || guestReset ? 0 : null;
      this.exit = { code, signal: code === 0 ? null : "SIGKILL", expected, reason, guestReset };
      this.ports.close();
      // Its console's last line, as a VM's kernel writes one (its log directory may be gone already).
      try {
        appendFileSync(this.consoleLog, `fake machine ${this.name} ${reason}\n`);
      } catch {}
      const exit = this.exit;
      setImmediate(() => this.emit("exit", exit));
    }
    return this.exit;
  }

  async stop(): Promise<MachineExit> {
    const exit = this.end(true, "stopped");
    rmSync(this.runDir, { recursive: true, force: true });
    return exit;
  }

  forceKill(): void {
    this.end(false, "killed");
  }
}
