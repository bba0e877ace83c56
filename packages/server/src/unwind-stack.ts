/**
 * What a start set up, undone last first: on a start that fails part way (so nothing it started
 * stays behind: the nftables table and taps, VMs, timers, listening sockets, the database) and on
 * an orderly close. Every step runs even when an earlier one fails; the steps run once.
 */
export class UnwindStack {
  private readonly steps: Array<{ what: string; undo: () => unknown }> = [];
  private running: Promise<void> | null = null;

  /** How to undo a step: pushed before the step can leave anything behind, so a half-done step is undone too. */
  push(what: string, undo: () => unknown): void {
    this.steps.push({ what, undo });
  }

  /**
   * Undoes every step pushed, last first. Rejects, once all have run, with the first failure
   * (naming its step); a second call answers the first's promise.
   */
  run(): Promise<void> {
    this.running ??= (async () => {
      let failed: Error | null = null;
      for (const step of this.steps.splice(0).reverse()) {
        try {
          await step.undo();
        } catch (err) {
          failed ??= new Error(`undoing ${step.what} failed: ${err instanceof Error ? err.message : String(err)}`, {
            cause: err,
          });
        }
      }
      if (failed) throw failed;
    })();
    return this.running;
  }
}
