/** A counter of bytes one side may still send, with a wait for more. */
export class Credit {
  private waiters: Array<() => void> = [];
  private closed = false;

  constructor(private available: number) {}

  add(n: number): void {
    this.available += n;
    for (const w of this.waiters.splice(0)) w();
  }

  /** Takes `n` once that much is available (at once if it is); false once closed. */
  async take(n: number): Promise<boolean> {
    while (!this.closed && this.available < n) await new Promise<void>((r) => this.waiters.push(r));
    if (this.closed) return false;
    this.available -= n;
    return true;
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
  }
}
