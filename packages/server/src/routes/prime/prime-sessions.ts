import type { ExecParams, ExecStreamEvent } from "@sandtree/protocol";
import type { Services } from "../../services/services.js";

// Prime's command sessions on sandtree's exec service: a session is one streamed exec, named by
// the client's session_uuid (Start with the same uuid attaches instead of starting another),
// re-attachable by Connect, and kept a while after it ended so a re-attach still sees its exit.

/** How long an ended session answers re-attaches (its end event replayed). */
const RETAIN_MS = 60_000;
/** Input and signal ids remembered per session (the client retries with the same id). */
const SEEN_IDS = 256;

export type SessionEvent =
  | { type: "start"; pid: number }
  | { type: "stdout" | "stderr"; data: Uint8Array }
  | { type: "end"; exitCode: number; status: string }
  | { type: "error"; code: string; message: string };

/** An unbounded queue one subscriber reads (the exec's output is already bounded by the VM's pace). */
export class EventQueue {
  private items: SessionEvent[] = [];
  private wake: (() => void) | null = null;
  closed = false;

  push(ev: SessionEvent): void {
    this.items.push(ev);
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  /** The next event; null once closed and drained, or `signal` aborted; "idle" when `idleMs` passed without one. */
  async next(idleMs: number, signal: AbortSignal): Promise<SessionEvent | null | "idle"> {
    for (;;) {
      if (signal.aborted) return null;
      const ev = this.items.shift();
      if (ev) return ev;
      if (this.closed) return null;
      const woke = await new Promise<boolean>((resolve) => {
        const done = (v: boolean) => {
          clearTimeout(t);
          signal.removeEventListener("abort", onAbort);
          resolve(v);
        };
        const onAbort = () => done(true);
        const t = setTimeout(() => done(false), idleMs);
        signal.addEventListener("abort", onAbort, { once: true });
        this.wake = () => done(true);
      });
      this.wake = null;
      if (!woke) return "idle";
    }
  }
}

export interface Session {
  uuid: string | null;
  teamId: string;
  sandboxId: string;
  argv: string[];
  cwd: string | undefined;
  user: string | undefined;
  execId: string | null;
  pid: number | null;
  /** The end (or error) once it came; replayed to every later attach. */
  last: SessionEvent | null;
  subscribers: Set<EventQueue>;
  /** Kills the command (for a session without uuid: when its only stream goes). */
  abort: AbortController;
  seen: Set<string>;
}

export class PrimeSessions {
  private readonly byKey = new Map<string, Session>();

  constructor(private readonly s: Services) {}

  private key(sandboxId: string, uuid: string): string {
    return `${sandboxId}/${uuid}`;
  }

  find(teamId: string, sandboxId: string, sel: { uuid?: string; pid?: number }): Session | undefined {
    if (sel.uuid !== undefined) {
      const found = this.byKey.get(this.key(sandboxId, sel.uuid));
      return found && found.teamId === teamId ? found : undefined;
    }
    for (const x of this.byKey.values()) if (x.teamId === teamId && x.sandboxId === sandboxId && x.pid === sel.pid) return x;
    return undefined;
  }

  live(teamId: string, sandboxId: string): Session[] {
    return [...this.byKey.values()].filter((x) => x.teamId === teamId && x.sandboxId === sandboxId && x.last === null);
  }

  /**
   * A new session (registered under its uuid, or under a private key), its events pumped to
   * subscribers from the first, `first` among them.
   */
  async start(teamId: string, sandboxId: string, uuid: string | null, p: ExecParams, first: EventQueue): Promise<Session> {
    const argv = p.command as string[];
    const session: Session = {
      uuid,
      teamId,
      sandboxId,
      argv,
      cwd: p.cwd,
      user: p.user,
      execId: null,
      pid: null,
      last: null,
      subscribers: new Set([first]),
      abort: new AbortController(),
      seen: new Set(),
    };
    const key = this.key(sandboxId, uuid ?? `anonymous-${Math.random().toString(36).slice(2)}`);
    const events = await this.s.exec.stream(teamId, sandboxId, p, session.abort.signal);
    this.byKey.set(key, session);
    void this.pump(session, events).finally(() => {
      setTimeout(() => this.byKey.delete(key), uuid ? RETAIN_MS : 0).unref();
    });
    return session;
  }

  private async pump(x: Session, events: AsyncIterable<ExecStreamEvent>): Promise<void> {
    const send = (ev: SessionEvent) => {
      for (const q of x.subscribers) q.push(ev);
    };
    try {
      for await (const ev of events) {
        if (ev.type === "started") {
          x.execId = ev.exec_id;
          x.pid = ev.pid;
          send({ type: "start", pid: ev.pid });
        } else if (ev.type === "stdout" || ev.type === "stderr") send(ev);
        else if (ev.type === "exit") {
          x.last = { type: "end", exitCode: ev.exit_code, status: ev.signal === null ? "exited" : `signal ${ev.signal}` };
          send(x.last);
        } else if (ev.type === "error") {
          x.last = { type: "error", code: ev.code, message: ev.message };
          send(x.last);
        }
      }
    } catch (err) {
      x.last = { type: "error", code: "GUEST_ERROR", message: (err as Error).message };
      send(x.last);
    } finally {
      x.last ??= { type: "error", code: "GUEST_ERROR", message: "the command's stream ended without an exit status" };
      for (const q of x.subscribers) q.close();
    }
  }

  /** A queue of the session's events from now on; an attach after the start sees the start again, and the end if it came. */
  subscribe(x: Session): EventQueue {
    const q = new EventQueue();
    if (x.pid !== null) q.push({ type: "start", pid: x.pid });
    if (x.last !== null) {
      q.push(x.last);
      q.close();
    } else x.subscribers.add(q);
    return q;
  }

  unsubscribe(x: Session, q: EventQueue): void {
    x.subscribers.delete(q);
  }

  /** True the first time an input or signal id is seen (a retry of the same id is acknowledged, not applied again). */
  firstSeen(x: Session, id: string | undefined): boolean {
    if (id === undefined || id === "") return true;
    if (x.seen.has(id)) return false;
    x.seen.add(id);
    if (x.seen.size > SEEN_IDS) x.seen.delete(x.seen.values().next().value as string);
    return true;
  }
}
