import type { ExecSpec, MachineExec } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import { streamErrorCode } from "../observability/error-codes.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { signalNumber } from "./signals.js";

/** What a process table entry streams to whoever is attached. */
export type ProcessEvent =
  | { type: "start"; pid: number }
  | { type: "stdout" | "stderr" | "pty"; data: Buffer }
  | { type: "end"; exit_code: number; signal: number | null; timed_out: boolean; error?: string };

export interface ProcessConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

export interface StartProcessParams extends ProcessConfig {
  user?: string;
  tag?: string;
  /** Keep stdin open for input (always open on a pty). */
  stdin: boolean;
  pty?: { rows: number; cols: number };
}

export interface ProcessInfo {
  pid: number;
  tag?: string;
  config: ProcessConfig;
}

/** Which process: its guest pid or the tag it was started with. */
export type ProcessSelector = { pid: number } | { tag: string };

interface Entry {
  teamId: string;
  sandboxId: string;
  pid: number;
  tag?: string;
  config: ProcessConfig;
  exec: MachineExec;
  subscribers: Set<Subscriber>;
}

/** Output queued for one reader at most; past it that reader misses output (counted in `droppedBytes`). */
export const SUBSCRIBER_QUEUE_CAP = 8 * 1024 * 1024;

/**
 * One attached reader: events are queued (output is never held back for a slow reader's sake,
 * and a reader that does not keep up loses output past SUBSCRIBER_QUEUE_CAP, never its end).
 * Its iterator's return() detaches it at once, even while a next() waits.
 */
export class Subscriber implements AsyncIterableIterator<ProcessEvent> {
  private readonly queue: ProcessEvent[] = [];
  /** Output bytes in the queue now, and those dropped because the queue was full. */
  queuedBytes = 0;
  droppedBytes = 0;
  private waiter: ((r: IteratorResult<ProcessEvent>) => void) | null = null;
  private closed = false;

  constructor(private readonly detach: () => void) {}

  push(ev: ProcessEvent): void {
    if (this.closed) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w({ value: ev, done: false });
      return;
    }
    if ("data" in ev) {
      if (this.queuedBytes + ev.data.length > SUBSCRIBER_QUEUE_CAP) {
        this.droppedBytes += ev.data.length;
        return;
      }
      this.queuedBytes += ev.data.length;
    }
    this.queue.push(ev);
  }

  /** No more events (after those queued). */
  end(): void {
    this.closed = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<ProcessEvent>> {
    const ev = this.queue.shift();
    if (ev && "data" in ev) this.queuedBytes -= ev.data.length;
    if (ev) return Promise.resolve({ value: ev, done: false });
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  return(): Promise<IteratorResult<ProcessEvent>> {
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.end();
    this.detach();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<ProcessEvent> {
    return this;
  }
}

/**
 * Processes that outlive the request which started them (the E2B daemon's model): each one runs
 * until it exits or is signalled; any number of readers attach by pid or tag and get its events
 * from then on. Output nobody reads is dropped, never held in the guest, so a process without a
 * reader never blocks. Entries go when the process ends or the sandbox is torn down.
 */
export class ProcessTable {
  private readonly entries = new Map<string, Map<number, Entry>>();

  constructor(private readonly sandboxes: SandboxService) {
    sandboxes.onTeardown((id) => this.entries.delete(id));
  }

  /** Starts a process; resolves once the guest started it, with the first reader attached. */
  async start(
    teamId: string,
    sandboxId: string,
    p: StartProcessParams,
  ): Promise<{ pid: number; events: AsyncIterable<ProcessEvent> }> {
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const sb = await this.sandboxes.get(teamId, sandboxId);
    if (p.tag !== undefined && this.find(sandboxId, { tag: p.tag }))
      throw new SandtreeError("ALREADY_EXISTS", `a process tagged ${p.tag} is running`, { tag: p.tag });
    const spec: ExecSpec = {
      argv: [p.cmd, ...p.args],
      env: { ...(await this.sandboxes.environmentOf(sb)), ...p.envs },
      stdin: p.stdin,
    };
    if (p.cwd) spec.cwd = p.cwd;
    if (p.user) spec.user = p.user;
    if (p.pty) spec.pty = p.pty;
    const exec = vm.exec(spec);
    const first = await exec.events.next().catch((err: unknown) => {
      throw new SandtreeError(streamErrorCode(err, "GUEST_ERROR"), `cannot start ${p.cmd}: ${(err as Error).message}`);
    });
    if (first.done || first.value.type !== "started") {
      exec.signal(9);
      throw new SandtreeError("GUEST_ERROR", `${p.cmd} did not start`);
    }
    const entry: Entry = {
      teamId,
      sandboxId,
      pid: first.value.pid,
      config: { cmd: p.cmd, args: p.args, envs: p.envs, ...(p.cwd ? { cwd: p.cwd } : {}) },
      exec,
      subscribers: new Set(),
      ...(p.tag !== undefined ? { tag: p.tag } : {}),
    };
    let table = this.entries.get(sandboxId);
    if (!table) this.entries.set(sandboxId, (table = new Map()));
    table.set(entry.pid, entry);
    const events = this.subscribe(entry);
    void this.pump(entry, p.pty !== undefined);
    return { pid: entry.pid, events };
  }

  /** Attaches to a running process: a start event, then its events from now on. */
  attach(teamId: string, sandboxId: string, sel: ProcessSelector): { pid: number; events: AsyncIterable<ProcessEvent> } {
    const e = this.get(teamId, sandboxId, sel);
    return { pid: e.pid, events: this.subscribe(e) };
  }

  async list(teamId: string, sandboxId: string): Promise<ProcessInfo[]> {
    await this.sandboxes.get(teamId, sandboxId);
    return [...(this.entries.get(sandboxId)?.values() ?? [])].map((e) => ({
      pid: e.pid,
      config: e.config,
      ...(e.tag !== undefined ? { tag: e.tag } : {}),
    }));
  }

  async write(teamId: string, sandboxId: string, sel: ProcessSelector, data: Buffer): Promise<void> {
    await this.get(teamId, sandboxId, sel).exec.writeStdin(data);
  }

  closeStdin(teamId: string, sandboxId: string, sel: ProcessSelector): void {
    this.get(teamId, sandboxId, sel).exec.closeStdin();
  }

  signal(teamId: string, sandboxId: string, sel: ProcessSelector, signal: string | number): void {
    this.get(teamId, sandboxId, sel).exec.signal(signalNumber(signal));
  }

  resize(teamId: string, sandboxId: string, sel: ProcessSelector, rows: number, cols: number): void {
    this.get(teamId, sandboxId, sel).exec.resize(rows, cols);
  }

  private find(sandboxId: string, sel: ProcessSelector): Entry | undefined {
    const table = this.entries.get(sandboxId);
    if (!table) return undefined;
    if ("pid" in sel) return table.get(sel.pid);
    for (const e of table.values()) if (e.tag === sel.tag) return e;
    return undefined;
  }

  private get(teamId: string, sandboxId: string, sel: ProcessSelector): Entry {
    const e = this.find(sandboxId, sel);
    if (!e || e.teamId !== teamId) {
      const what = "pid" in sel ? `pid ${sel.pid}` : `tag ${sel.tag}`;
      throw new SandtreeError("NOT_FOUND", `process with ${what} not found in sandbox ${sandboxId}`, { ...sel });
    }
    return e;
  }

  private subscribe(e: Entry): AsyncIterable<ProcessEvent> {
    const sub = new Subscriber(() => e.subscribers.delete(sub));
    sub.push({ type: "start", pid: e.pid });
    e.subscribers.add(sub);
    return sub;
  }

  /** Reads every event of the process and hands it to the readers attached at that moment. */
  private async pump(e: Entry, pty: boolean): Promise<void> {
    const send = (ev: ProcessEvent) => {
      for (const s of e.subscribers) s.push(ev);
    };
    let end: ProcessEvent | null = null;
    try {
      for await (const ev of e.exec.events) {
        if (ev.type === "stdout" || ev.type === "stderr") send({ type: pty ? "pty" : ev.type, data: ev.data });
        else if (ev.type === "exit") {
          end = { type: "end", exit_code: ev.info.exit_code, signal: ev.info.signal, timed_out: ev.info.timed_out };
        }
      }
    } catch (err) {
      end = { type: "end", exit_code: -1, signal: null, timed_out: false, error: (err as Error).message };
    }
    this.entries.get(e.sandboxId)?.delete(e.pid);
    send(end ?? { type: "end", exit_code: -1, signal: null, timed_out: false, error: "the process ended without a status" });
    for (const s of e.subscribers) s.end();
  }
}
