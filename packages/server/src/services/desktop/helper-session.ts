import type { Machine, MachineExec } from "@sandtree/host";

/** What one action answered: the helper's exit code for it and its stdout (the event's JSON line). */
export interface HelperAnswer {
  exit_code: number;
  stdout: string;
}

/**
 * One long-lived `sandtree-desktop serve` in the guest per desktop (started over the agent, its
 * stdin kept open): actions go in as JSON lines and each answers one line `{exit, stdout}`. It
 * spares every action a Python start and its imports in the guest. `run` answers null when the
 * session is gone (its machine was reset or replaced, the helper has no `serve`): the caller then
 * runs the action as a one-shot exec.
 */
export class HelperSession {
  private chain: Promise<unknown> = Promise.resolve();
  private pending = "";
  private readonly lines: string[] = [];
  private waiter: ((line: string | null) => void) | null = null;
  private ended = false;
  /** Whether it ever answered an action (one that ends before its first answer cannot serve). */
  answered = false;
  private readonly exec: MachineExec;

  constructor(vm: Machine, helper: string) {
    this.exec = vm.exec({ argv: [helper, "serve"], env: {}, stdin: true });
    void this.pump();
  }

  get alive(): boolean {
    return !this.ended;
  }

  private async pump(): Promise<void> {
    try {
      for await (const ev of this.exec.events) {
        if (ev.type !== "stdout") continue;
        this.pending += ev.data.toString("utf8");
        for (let nl = this.pending.indexOf("\n"); nl >= 0; nl = this.pending.indexOf("\n")) {
          this.deliver(this.pending.slice(0, nl));
          this.pending = this.pending.slice(nl + 1);
        }
      }
    } catch {
      // the stream broke: the session is over
    } finally {
      this.ended = true;
      this.deliver(null);
    }
  }

  private deliver(line: string | null): void {
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      w(line);
    } else if (line !== null) this.lines.push(line);
  }

  private next(): Promise<string | null> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Runs one action (its JSON); one at a time, in order. */
  run(actionJson: string): Promise<HelperAnswer | null> {
    const turn = this.chain.then(async () => {
      if (this.ended) return null;
      try {
        await this.exec.writeStdin(Buffer.from(`${actionJson}\n`));
      } catch {
        return null;
      }
      const line = await this.next();
      if (line === null) return null;
      try {
        const a = JSON.parse(line) as { exit?: unknown; stdout?: unknown };
        if (typeof a.exit !== "number" || typeof a.stdout !== "string") return null;
        this.answered = true;
        return { exit_code: a.exit, stdout: a.stdout };
      } catch {
        return null;
      }
    });
    this.chain = turn.catch(() => {});
    return turn;
  }

  close(): void {
    if (this.ended) return;
    this.ended = true;
    try {
      this.exec.signal(9);
    } catch {} // it already ended
  }
}
