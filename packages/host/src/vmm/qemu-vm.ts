import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { AgentClient } from "../agent/agent-client.js";
import { qcow2VirtualSize } from "../disks/overlay.js";
import { modulesDiskFor } from "../paths.js";
import { Deadline } from "../util/deadline.js";
import { tailOfFile } from "../util/file-tail.js";
import { cpuWaitSince } from "./cpu-wait.js";
import { GuestTimerLostError, noteTimerLost, TIMER_LOST_BOOTS } from "./guest-timer.js";
import { defaultJailConfig, JailLease } from "./jail.js";
import { ROOT_NODE } from "./qemu-args.js";
import { launchQemu } from "./qemu-launch.js";
import { qemuAlive } from "./qemu-processes.js";
import { QmpClient, QmpClosedError } from "./qmp-client.js";
import { startFailureSentence } from "./start-failure.js";
import { connectGuest } from "./vm-connect.js";
import { type AdoptOptions, qemuSpecOf, type VmOptions, type VmPaths } from "./vm-options.js";

export { findQemuProcesses, qemuAlive, qemuPidsNamed } from "./qemu-processes.js";
export type { AdoptOptions, VmOptions } from "./vm-options.js";

/** The image file of a block node; QEMU reports a `json:{...}` name for nodes we stacked. */
function nodeFileName(file: string): string {
  if (!file.startsWith("json:")) return file;
  try {
    const spec = JSON.parse(file.slice(5)) as { file?: string | { filename?: string } };
    return (typeof spec.file === "string" ? spec.file : spec.file?.filename) ?? file;
  } catch {
    return file;
  }
}

export interface VmExit {
  code: number | null;
  signal: string | null;
  expected: boolean;
  reason: string;
  /** QEMU (run with -no-reboot) exited 0 by itself: its guest reset or powered off. */
  guestReset: boolean;
}

/** One supervised QEMU microVM with its QMP and agent connections. */
export class QemuVm extends EventEmitter {
  agent!: AgentClient;
  qmp: QmpClient | null = null;
  exit: VmExit | null = null;
  /** For an adopted VM: QEMU's run state when it was found (`running`, `paused`, `postmigrate`...). */
  adoptedRunState: string | undefined;
  /** Where the start's time went: ms after start() at each step's end, and the HELLOs it took. */
  startMarks: Record<string, number> | undefined;
  private stopping = false;
  private currentDisk: string | undefined;
  private currentNode = ROOT_NODE;
  private diskGeneration = 0;
  private readonly exited: Promise<VmExit>;
  private pollTimer: NodeJS.Timeout | null = null;
  /** The VM's place in the jail (null with the jail off): released once QEMU exited. */
  private lease: JailLease | null = null;

  /** `child` is null for an adopted QEMU (not our child): its exit is found by polling its pid. */
  private constructor(
    readonly opts: VmPaths,
    readonly child: ChildProcess | null,
    private readonly qemuPid: number,
  ) {
    super();
    this.exited = new Promise<VmExit>((resolve) => {
      const finish = (code: number | null, signal: string | null) => {
        if (this.exit) return;
        if (this.pollTimer) clearInterval(this.pollTimer);
        const stderr = tailOfFile(this.qemuLog, 2000).trim();
        // With -no-reboot a guest that resets (a reboot, a panic, a triple fault) or powers off ends QEMU with 0.
        const status = child
          ? signal
            ? `signal ${signal}`
            : code === 0
              ? "exit code 0: the guest reset or powered off"
              : `exit code ${code}`
          : "exit status unknown: adopted after a server restart";
        const reason = this.stopping
          ? "stopped"
          : `qemu exited unexpectedly (${status})${stderr ? `: ${stderr.split("\n").slice(-3).join(" | ")}` : ""}`;
        const guestReset = child !== null && !this.stopping && signal === null && code === 0;
        this.exit = { code, signal, expected: this.stopping, reason, guestReset };
        this.agent?.close();
        this.qmp?.close();
        const exit = this.exit;
        // The uid goes back to the pool only once its files are given back.
        void (this.lease?.release() ?? Promise.resolve())
          .catch(() => {})
          .then(() => {
            this.emit("exit", exit);
            resolve(exit);
          });
      };
      if (child) child.on("exit", finish);
      else {
        // Not our child, so no exit event: poll (kept referenced, like a child process would be).
        this.pollTimer = setInterval(() => {
          if (!qemuAlive(qemuPid, opts.name)) finish(null, null);
        }, 200);
      }
    });
  }

  get pid(): number {
    return this.child ? (this.child.pid ?? -1) : this.qemuPid;
  }
  get consoleLog(): string {
    return path.join(this.opts.logDir, "console.log");
  }
  get qemuLog(): string {
    return path.join(this.opts.logDir, "qemu.log");
  }

  /**
   * Boots the VM and resolves once the guest agent answered the handshake. A cold boot under TCG
   * whose guest lost its timer is booted again (TIMER_LOST_BOOTS in all; the cause goes to
   * qemu.log and to the start's steps).
   */
  static start(opts: VmOptions): Promise<QemuVm> {
    return QemuVm.boot(opts, performance.now(), {}, 1);
  }

  private static async boot(opts: VmOptions, t0: number, marks: Record<string, number>, attempt: number): Promise<QemuVm> {
    const mark = (step: string) => {
      marks[step] = Math.round(performance.now() - t0);
    };
    mkdirSync(opts.runDir, { recursive: true, mode: 0o700 });
    mkdirSync(opts.logDir, { recursive: true });
    const agentSocket = path.join(opts.runDir, "agent.sock");
    const qmpSocket = path.join(opts.runDir, "qmp.sock");
    const modulesDisk = modulesDiskFor(opts.initramfs);
    const spec = qemuSpecOf(opts, { agentSocket, qmpSocket, modulesDisk });
    // A clone of a root-waiting template: its own disk's size, sent with the HELLO that mounts it.
    const rootBytes = opts.rootWait && opts.restoreFrom && opts.rootDisk ? qcow2VirtualSize(opts.rootDisk) : null;
    if (opts.rootWait && opts.restoreFrom && rootBytes === null)
      throw new Error(`${opts.rootDisk ?? "no root disk"} is not a qcow2 disk`);
    const agentOpts = { ...(opts.guestNet ? { net: opts.guestNet } : {}), ...(rootBytes !== null ? { rootBytes } : {}) };
    const { child, lease } = await launchQemu({
      spec,
      runDir: opts.runDir,
      logFile: path.join(opts.logDir, "qemu.log"),
      ...(opts.restoreFrom ? { incomingFile: opts.restoreFrom } : {}),
      ...(opts.qemuBinary ? { binary: opts.qemuBinary } : {}),
      jail: opts.jail ?? defaultJailConfig(),
    });
    mark("launched");
    const vm = new QemuVm(opts, child, child.pid ?? -1);
    vm.lease = lease;
    // The one deadline of the start: the agent's connect gets it too (its own default, 120 s,
    // ended slow boots early, with no word of a deadline).
    // Time its threads waited for a host CPU does not count (a busy host's VMs boot slowly, they are
    // not hung), up to twice the deadline.
    const bootMs = opts.bootTimeoutMs ?? 180_000;
    const deadline = new Deadline(bootMs, "the guest agent", opts.signal, {
      notCountedMs: cpuWaitSince(vm.pid),
      capMs: 2 * bootMs,
    });
    const abort = deadline.signal;
    const died = vm.exited.then((e) => {
      throw new Error(e.reason);
    });
    try {
      opts.onSpawn?.(vm.pid);
      const [qmp, agent] = await Promise.race([
        connectGuest({
          qmpSocket,
          agentSocket,
          agentOpts,
          rootBytes,
          signal: abort,
          // Its own timers end at the cap: this deadline's signal ends it sooner.
          timeoutMs: 2 * bootMs,
          restored: Boolean(opts.restoreFrom),
          ignoreShared: opts.memoryFile !== undefined,
          watchTimer: opts.accel === "tcg" && !opts.restoreFrom,
          mark,
        }),
        died,
      ]);
      vm.qmp = qmp;
      vm.agent = agent;
      vm.startMarks = { ...marks, hellos: agent.hellosSent };
      return vm;
    } catch (err) {
      // Exited on its own (before stop() marks any exit expected), or its control socket closed.
      const exitedItself = (vm.exit !== null && !vm.exit.expected) || err instanceof QmpClosedError;
      await vm.stop({ graceMs: 0 });
      const console = tailOfFile(vm.consoleLog, 1500).trim();
      const timerLost = err instanceof GuestTimerLostError;
      if (timerLost) noteTimerLost(vm.qemuLog, attempt, err, console);
      if (timerLost && attempt < TIMER_LOST_BOOTS) {
        deadline.clear();
        // This boot's steps give way to the next one's; the lost boot stays as a step of its own.
        for (const step of Object.keys(marks)) if (!step.startsWith("boot ")) delete marks[step];
        mark(`boot ${attempt} lost its timer`);
        return QemuVm.boot(opts, t0, marks, attempt + 1);
      }
      const why = deadline.timedOut ? "guest agent did not answer in time" : (err as Error).message;
      const tail = console ? `; console: ${console.split("\n").slice(-5).join(" | ")}` : "";
      // The user reads the message (a sandbox's error_reason); QEMU's and QMP's words stay in the
      // cause, which the server logs.
      const detail = new Error(`VM start failed: ${why}${tail}`, { cause: err });
      throw new SandtreeError(
        "VM_START_FAILED",
        startFailureSentence(
          deadline.timedOut,
          exitedItself,
          deadline.ms,
          deadline.elapsedMs,
          exitedItself && vm.exit?.code === 0 && !vm.exit.signal,
          timerLost ? attempt : 0,
        ),
        { vm: opts.name },
        { cause: detail },
      );
    } finally {
      // Its timer would otherwise hold the process alive for the whole boot deadline after every start.
      deadline.clear();
    }
  }

  /**
   * Takes over a QEMU started by an earlier server process: reconnects QMP and the agent (a
   * fresh HELLO resynchronises the guest, which drops the old streams) and learns the active
   * root disk from QMP. Every step runs under one deadline; a VM that misses it (stopped, hung)
   * or fails is killed with SIGKILL and adopt() throws with the step that did not answer.
   */
  static async adopt(opts: AdoptOptions): Promise<QemuVm> {
    if (!qemuAlive(opts.pid, opts.name)) throw new Error(`QEMU ${opts.name} (pid ${opts.pid}) is not running`);
    const vm = new QemuVm(
      { name: opts.name, runDir: opts.runDir, logDir: opts.logDir, ...(opts.directDisk ? { directDisk: true } : {}) },
      null,
      opts.pid,
    );
    vm.lease = JailLease.adopt(opts.jail ?? defaultJailConfig(), opts.name, opts.pid);
    const timeoutMs = opts.connectTimeoutMs ?? 10_000;
    const deadline = new Deadline(timeoutMs, "the VM", opts.signal);
    const signal = deadline.signal;
    const died = vm.exited.then((e) => {
      throw new Error(e.reason);
    });
    let step = "QMP connect";
    // Each step ends at the deadline, whatever it awaits (a socket, a command, the guest).
    const within = <T>(p: Promise<T>) => Promise.race([deadline.race(p), died]);
    try {
      const qmp = await within(QmpClient.connect(path.join(opts.runDir, "qmp.sock"), { signal, timeoutMs }));
      vm.qmp = qmp;
      step = "QMP query-status";
      const st = await within(qmp.execute<{ status?: string }>("query-status", undefined, { signal }));
      vm.adoptedRunState = st.status ?? "unknown";
      // Stopped (a pause, or a crash while a pause or a memory save held it): the guest runs for the handshake.
      step = "QMP cont";
      if (st.status !== "running") await within(qmp.execute("cont", undefined, { signal }));
      step = "the guest agent's handshake";
      const agent = await within(
        AgentClient.connect(path.join(opts.runDir, "agent.sock"), {
          signal,
          timeoutMs,
          ...(opts.guestNet ? { net: opts.guestNet } : {}),
        }),
      );
      vm.agent = agent;
      step = "disk discovery (QMP query-block)";
      await within(vm.learnRootDisk(signal));
      step = "QMP stop";
      if (opts.keepPaused) await within(qmp.execute("stop", undefined, { signal }));
      return vm;
    } catch (err) {
      const shutdown = opts.signal?.aborted ?? false;
      // Killed, not asked: a stopped or hung QEMU answers no quit, and SIGKILL ends a stopped process too.
      await vm.kill();
      const why = shutdown
        ? `adoption cancelled (${String((opts.signal?.reason as Error | undefined)?.message ?? "aborted")})`
        : deadline.timedOut
          ? `${step} did not answer within ${Math.round(timeoutMs / 100) / 10} s (QMP or the guest agent did not answer in time); the VM was killed`
          : `${step} failed: ${(err as Error).message}; the VM was killed`;
      throw new Error(`could not reconnect to the VM: ${why}`, { cause: err });
    } finally {
      deadline.clear();
    }
  }

  /** Reads the root disk's top node and file (disk snapshots may have moved them) from QMP. */
  private async learnRootDisk(signal?: AbortSignal): Promise<void> {
    if (!this.qmp) return;
    const opts = signal ? { signal } : {};
    const blocks = await this.qmp.execute<Array<{ inserted?: { "node-name"?: string; file?: string } }>>(
      "query-block",
      undefined,
      opts,
    );
    for (const b of blocks) {
      const node = b.inserted?.["node-name"];
      const m = node ? /^disk(\d+)$/.exec(node) : null;
      if (!node || !m || !b.inserted?.file) continue;
      this.currentNode = node;
      this.currentDisk = nodeFileName(b.inserted.file);
      this.diskGeneration = Number(m[1]);
    }
    // A crash between blockdev-add and blockdev-snapshot leaves a node outside the chain: skip its name.
    const nodes = await this.qmp.execute<Array<{ "node-name"?: string }>>("query-named-block-nodes", undefined, opts);
    for (const n of nodes) {
      const m = /^disk(\d+)$/.exec(n["node-name"] ?? "");
      if (m) this.diskGeneration = Math.max(this.diskGeneration, Number(m[1]));
    }
  }

  /**
   * SIGKILL now (no agent shutdown, no QMP quit: for a VM that does not answer) and waits for
   * the exit; removes the sockets. Idempotent.
   */
  async kill(): Promise<VmExit> {
    this.stopping = true;
    if (!this.exit) this.sigkill();
    return this.reaped();
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
      if (!this.exit) this.sigkill();
    }
    return this.reaped();
  }

  /** SIGKILL to QEMU: our child, or an adopted process still alive under its name. */
  private sigkill(): void {
    try {
      if (this.child) this.child.kill("SIGKILL");
      else if (qemuAlive(this.qemuPid, this.opts.name)) process.kill(this.qemuPid, "SIGKILL");
    } catch {}
  }

  /** Waits for QEMU's exit, then removes the sockets. */
  private async reaped(): Promise<VmExit> {
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
  async snapshotRootDisk(newOverlay: string, opts: { timeoutMs?: number } = {}): Promise<string> {
    const frozen = this.activeDisk;
    if (!frozen || !this.qmp) throw new Error("this VM has no root disk to snapshot");
    // The new top is the VM's own file (its jailed QEMU opens it read-write).
    this.lease?.own(newOverlay);
    const node = `disk${++this.diskGeneration}`;
    const deadline = opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {};
    await this.qmp.execute(
      "blockdev-add",
      {
        driver: "qcow2",
        "node-name": node,
        discard: "unmap",
        file: { driver: "file", filename: newOverlay, ...(this.opts.directDisk ? { cache: { direct: true } } : {}) },
        backing: null,
      },
      deadline,
    );
    await this.qmp.execute("blockdev-snapshot", { node: this.currentNode, overlay: node }, deadline);
    this.currentNode = node;
    this.currentDisk = newOverlay;
    return frozen;
  }

  /** Resolves when QEMU has exited. */
  waitExit(): Promise<VmExit> {
    return this.exited;
  }
}
