import path from "node:path";
import type { Accel, GuestArtifacts, MachineHost, MemoryImages, TemplateStore } from "@sandtree/host";
import type { NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import type { Provisioner } from "./provisioner.js";

/** A warm template nobody cloned for this long is removed at the next start. */
const TEMPLATE_MAX_IDLE_MS = 7 * 24 * 3600 * 1000;

export interface WarmStartsDeps {
  /** Owns the caches (a host without warm caches: warm starts are off). */
  host: MachineHost;
  dataDir: string;
  guest: GuestArtifacts;
  accel: Accel;
  log: Logger;
  network?: NetworkService;
}

/**
 * The local caches that make starts warm: the booted templates (one per shape, and per image)
 * and the copy-on-write RAM images of memory checkpoints. `null` members: warm starts are off.
 */
export class WarmStarts {
  readonly templates: TemplateStore | null;
  readonly memoryImages: MemoryImages | null;

  constructor(
    private readonly deps: WarmStartsDeps,
    enabled: boolean,
  ) {
    const caches = enabled
      ? deps.host.warmCaches({
          dataDir: deps.dataDir,
          taps: deps.network ? deps.network.taps : null,
          onMemoryImageError: (err, memState) =>
            deps.log.warn(
              { err: err.message, memState: path.basename(memState) },
              "memory image build failed: starts from this checkpoint load its whole stream",
            ),
          onTemplateError: (err, inputs, { attempt, of }) =>
            deps.log.warn(
              {
                err: err.message,
                cause: err.cause instanceof Error ? err.cause.message : undefined,
                cpus: inputs.cpuCores,
                memoryMb: inputs.memoryMb,
                image: inputs.image ? "yes" : "no",
                attempt,
                of,
              },
              attempt < of
                ? "warm template build failed: trying it again"
                : "warm template build failed: starts of this shape boot cold until a later start builds it",
            ),
        })
      : null;
    this.templates = caches?.templates ?? null;
    this.memoryImages = caches?.memoryImages ?? null;
  }

  /**
   * Removes warm templates no start can use any more (another kernel, agent, device model or
   * template format, a build a crash cut short) or unused for a week, and rebuilds in the
   * background the stale ones whose shape (CPUs, memory) was in use; removes memory images of
   * deleted checkpoints. Run at start, before requests are taken.
   */
  prune(provisioner: Provisioner): void {
    const { log } = this.deps;
    try {
      this.memoryImages?.prune();
    } catch (err) {
      log.warn({ err: (err as Error).message }, "could not prune memory images");
    }
    if (!this.templates) return;
    try {
      const r = this.templates.prune(this.deps.guest, { maxIdleMs: TEMPLATE_MAX_IDLE_MS });
      if (r.removed.length > 0 || r.keptDisks.length > 0)
        log.info(
          { removed: r.removed.length, freedMiB: Math.round(r.freedBytes / 1048576), disksStillInUse: r.keptDisks.length },
          "stale warm templates pruned",
        );
      for (const old of r.rebuild) {
        const inputs = provisioner.templateInputs(old.cpuCores, old.memoryMb, old.nested === true);
        if (inputs && old.accel === this.deps.accel) provisioner.prewarm(inputs);
      }
    } catch (err) {
      log.warn({ err: (err as Error).message }, "could not prune warm templates");
    }
  }

  /** Stops template and memory image builds in flight (each kills its machine and gives its tap back). */
  async close(): Promise<void> {
    await Promise.all([this.templates?.close(), this.memoryImages?.close()]);
  }
}
