import { type ChildProcess, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { AgentClient } from "../agent/agent-client.js";
import { type Accel, buildQemuArgs, ROOT_NODE } from "./qemu-args.js";
import { QmpClient } from "./qmp-client.js";

export interface VmOptions {
  name: string;
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  kernel: string;
  initramfs: string;
  rootDisk?: string;
  /** Holds the sockets and pid file; removed on stop. Keep it short (Unix socket paths). */
  runDir: string;
  /** Holds console.log and qemu.log; kept after stop for post-mortems. */
  logDir: string;
  bootTimeoutMs?: number;
  signal?: AbortSignal;
  qemuBinary?: string;
}

export interface VmExit {
  code: number | null;
  signal: string | null;
  expected: boolean;
  reason: string;
}

export function tailOfFile(file: string, bytes: number): string {
  try {
    const size = statSync(file).size;
    const buf = readFileSync(file);
    return buf.subarray(Math.max(0, size - bytes)).toString("utf8");
  } catch {
    return "";
  }
}

/** One supervised QEMU microVM with its QMP and agent connections. */
export class QemuVm extends EventEmitter {
  agent!: AgentClient;
  qmp: QmpClient | null = null;
  exit: VmExit | null = null;
  private stopping = false;
  private currentDisk: string | undefined;
  private currentNode = ROOT_NODE;
  private diskGeneration = 0;
  private readonly exited: Promise<VmExit>;

  private constructor(
    readonly opts: VmOptions,
    readonly child: ChildProcess,
  ) {
    super();
    this.exited = new Promise<VmExit>((resolve) => {
      child.on("exit", (code, signal) => {
        const stderr = tailOfFile(this.qemuLog, 2000).trim();
        const reason = this.stopping
          ? "stopped"
          : `qemu exited unexpectedly (${signal ? `signal ${signal}` : `exit code ${code}`})${stderr ? `: ${stderr.split("\n").slice(-3).join(" | ")}` : ""}`;
        this.exit = { code, signal, expected: this.stopping, reason };
        this.agent?.close();
        this.qmp?.close();
        this.emit("exit", this.exit);
        resolve(this.exit);
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }
  get consoleLog(): string {
    return path.join(this.opts.logDir, "console.log");
  }
  get qemuLog(): string {
    return path.join(this.opts.logDir, "qemu.log");
  }

  /** Boots the VM and resolves once the guest agent answered the handshake. */
  static async start(opts: VmOptions): Promise<QemuVm> {
    mkdirSync(opts.runDir, { recursive: true, mode: 0o700 });
    mkdirSync(opts.logDir, { recursive: true });
    const agentSocket = path.join(opts.runDir, "agent.sock");
    const qmpSocket = path.join(opts.runDir, "qmp.sock");
    const args = buildQemuArgs({
      name: opts.name,
      accel: opts.accel,
      cpuCores: opts.cpuCores,
      memoryMb: opts.memoryMb,
      kernel: opts.kernel,
      initramfs: opts.initramfs,
      ...(opts.rootDisk ? { rootDisk: opts.rootDisk } : {}),
      agentSocket,
      qmpSocket,
      consoleLog: path.join(opts.logDir, "console.log"),
      pidFile: path.join(opts.runDir, "qemu.pid"),
    });
    const logFd = openSync(path.join(opts.logDir, "qemu.log"), "a");
    let child: ChildProcess;
    try {
      // Own process group: a Ctrl-C meant for the server must not kill guests mid-write.
      child = spawn(opts.qemuBinary ?? "qemu-system-x86_64", args, { stdio: ["ignore", logFd, logFd], detached: true });
    } finally {
      closeSync(logFd);
    }
    const vm = new QemuVm(opts, child);
    child.on("error", () => {});
    const abort = AbortSignal.any([AbortSignal.timeout(opts.bootTimeoutMs ?? 180_000), ...(opts.signal ? [opts.signal] : [])]);
    const died = vm.exited.then((e) => {
      throw new Error(e.reason);
    });
    try {
      const [qmp, agent] = await Promise.race([
        Promise.all([QmpClient.connect(qmpSocket, { signal: abort }), AgentClient.connect(agentSocket, { signal: abort })]),
        died,
      ]);
      vm.qmp = qmp;
      vm.agent = agent;
      return vm;
    } catch (err) {
      await vm.stop({ graceMs: 0 });
      const console = tailOfFile(vm.consoleLog, 1500).trim();
      const why =
        abort.aborted && !(opts.signal?.aborted ?? false) ? "guest agent did not answer in time" : (err as Error).message;
      throw new Error(`VM start failed: ${why}${console ? `; console: ${console.split("\n").slice(-5).join(" | ")}` : ""}`, {
        cause: err,
      });
    }
  }

  /** Stops the VM (agent shutdown, then QMP quit, then SIGKILL) and removes its sockets. Idempotent. */
  async stop(opts: { graceMs?: number } = {}): Promise<VmExit> {
    this.stopping = true;
    if (!this.exit) {
      const grace = opts.graceMs ?? 3000;
      const waitExit = (ms: number) =>
        Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => setTimeout(r, ms, false).unref())]);
      if (grace > 0 && this.agent && !this.agent.isClosed) {
        this.agent.shutdown();
        await waitExit(grace);
      }
      if (!this.exit && this.qmp) {
        this.qmp.execute("quit").catch(() => {});
        await waitExit(1000);
      }
      if (!this.exit) {
        try {
          this.child.kill("SIGKILL");
        } catch {}
      }
    }
    const exit = await this.exited;
    rmSync(this.opts.runDir, { recursive: true, force: true });
    return exit;
  }

  /** The qcow2 file the guest writes to now (changes with every disk snapshot). */
  get activeDisk(): string | undefined {
    return this.currentDisk ?? this.opts.rootDisk;
  }

  /**
   * Puts `newOverlay` (an existing qcow2 whose header names the current disk as its backing)
   * on top of the active disk (QMP blockdev-add + blockdev-snapshot, milliseconds). The old
   * disk becomes read-only and is returned. QEMU does not rewrite headers here, so relative
   * backing names stay as created. Freeze the guest filesystem around this call.
   */
  async snapshotRootDisk(newOverlay: string): Promise<string> {
    const frozen = this.activeDisk;
    if (!frozen || !this.qmp) throw new Error("this VM has no root disk to snapshot");
    const node = `disk${++this.diskGeneration}`;
    await this.qmp.execute("blockdev-add", {
      driver: "qcow2",
      "node-name": node,
      discard: "unmap",
      file: { driver: "file", filename: newOverlay },
      backing: null,
    });
    await this.qmp.execute("blockdev-snapshot", { node: this.currentNode, overlay: node });
    this.currentNode = node;
    this.currentDisk = newOverlay;
    return frozen;
  }

  /** Resolves when QEMU has exited. */
  waitExit(): Promise<VmExit> {
    return this.exited;
  }
}
