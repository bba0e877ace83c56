import type { SandboxService } from "./sandbox-service.js";

/**
 * The starts in flight here (creates, restores, forks, resets), for callers that answer only once
 * a sandbox runs (E2B's create does). Registered before any start, so a start is known from the
 * moment the create that made it returns.
 */
export class SandboxStarts {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(sandboxes: SandboxService) {
    sandboxes.onStart(({ sandbox, ready }) => {
      const settled = ready.then(
        () => {},
        () => {},
      );
      this.inFlight.set(sandbox.id, settled);
      void settled.then(() => {
        if (this.inFlight.get(sandbox.id) === settled) this.inFlight.delete(sandbox.id);
      });
    });
  }

  /** Settles once the sandbox's start here is RUNNING or failed; undefined when none is in flight. */
  settled(id: string): Promise<void> | undefined {
    return this.inFlight.get(id);
  }
}
