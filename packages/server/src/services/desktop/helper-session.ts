import type { Machine, MachineExec } from "@sandtree/host";

/** What one action answered: the helper's exit code for it, its stdout (the event's JSON line), and the PNG asked for. */
export interface HelperAnswer {
  exit_code: number;
  stdout: string;
  png?: Buffer;
}

/**
 * One long-lived `sandtree-desktop serve` in the guest per desktop (started over the agent, its
 * stdin kept open): actions go in as JSON lines and each answers one line `{exit, stdout}`. It
 * spares every action a Python start and its imports in the guest. A helper that first says
 * `{"hello": {"protocol": 2}}` also takes `{action, png: true}` and then follows its answer line
 * (`png`: N) with the N bytes of the screen after the action, so a screenshot reaches the client
 * as bytes, with no second read of its file. `run` answers null when the session is gone (its
 * machine was reset or replaced, the helper has no `serve`): the caller then runs the action as
 * a one-shot exec.
 */
export class HelperSession {
  private chain: Promise<unknown> = Promise.resolve();
  /** Bytes read and not yet handed out (a partial line, or a PNG still arriving). */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private readonly answers: HelperAnswer[] = [];
  private waiter: ((a: HelperAnswer | null) => void) | null = null;
  /** An answer line read whose PNG bytes are still arriving. */
  private awaitingPng: { answer: HelperAnswer; size: number } | null = null;
  private ended = false;
  /** Whether it ever answered an action (one that ends before its first answer cannot serve). */
  answered = false;
  /** The protocol the helper said it speaks (1 until it says otherwise). */
  protocol = 1;
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
        this.pending.push(ev.data);
        this.pendingBytes += ev.data.length;
        if (!this.parse()) break;
      }
    } catch {
      // the stream broke: the session is over
    } finally {
      this.ended = true;
      this.deliver(null);
    }
  }

  /** Hands out every complete answer buffered; false when the helper said something unreadable. */
  private parse(): boolean {
    for (;;) {
      if (this.awaitingPng) {
        if (this.pendingBytes < this.awaitingPng.size) return true;
        const { answer, size } = this.awaitingPng;
        this.awaitingPng = null;
        answer.png = this.take(size);
        this.deliver(answer);
        continue;
      }
      const joined = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending);
      const nl = joined?.indexOf(10) ?? -1;
      if (!joined || nl < 0) {
        if (joined) this.pending = [joined];
        return true;
      }
      this.pending = [joined];
      const line = this.take(nl + 1)
        .toString("utf8", 0, nl)
        .trim();
      let a: { exit?: unknown; stdout?: unknown; png?: unknown; hello?: { protocol?: unknown } };
      try {
        a = JSON.parse(line);
      } catch {
        return false;
      }
      if (a.hello) {
        if (typeof a.hello.protocol === "number") this.protocol = a.hello.protocol;
        continue;
      }
      if (typeof a.exit !== "number" || typeof a.stdout !== "string") return false;
      const answer: HelperAnswer = { exit_code: a.exit, stdout: a.stdout };
      if (typeof a.png === "number" && a.png >= 0) this.awaitingPng = { answer, size: a.png };
      else this.deliver(answer);
    }
  }

  /** The next `n` buffered bytes (there are at least that many). */
  private take(n: number): Buffer {
    const all = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingBytes = rest.length;
    return out;
  }

  private deliver(answer: HelperAnswer | null): void {
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      w(answer);
    } else if (answer !== null) this.answers.push(answer);
  }

  private next(): Promise<HelperAnswer | null> {
    const a = this.answers.shift();
    if (a !== undefined) return Promise.resolve(a);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /**
   * Runs one action (its JSON); one at a time, in order. With `png`, a helper that speaks
   * protocol 2 answers the PNG of the screen after it too (an older one answers without).
   */
  run(actionJson: string, opts: { png?: boolean } = {}): Promise<HelperAnswer | null> {
    const turn = this.chain.then(async () => {
      if (this.ended) return null;
      const line = opts.png && this.protocol >= 2 ? `{"action":${actionJson},"png":true}` : actionJson;
      try {
        await this.exec.writeStdin(Buffer.from(`${line}\n`));
      } catch {
        return null;
      }
      const answer = await this.next();
      if (answer === null) return null;
      this.answered = true;
      return answer;
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
