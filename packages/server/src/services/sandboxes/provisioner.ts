import { createWriteStream, mkdirSync } from "node:fs";
import path from "node:path";
import type {
  Accel,
  GuestArtifacts,
  Machine,
  MachineHost,
  MachineSpec,
  MemoryImages,
  MemoryShape,
  Template,
  TemplateInputs,
  TemplateStore,
} from "@sandtree/host";
import { type CreateSandboxParams, DEFAULT_TEAM_LIMITS, type Sandbox, SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import { imageDefaults } from "../images/image-defaults.js";
import type { ImageResolver } from "../images/image-resolver.js";
import type { NetworkService } from "../network/network-service.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "./error-end.js";
import { ratesOf } from "./resource-limits.js";
import type { SandboxMachines } from "./sandbox-machines.js";
import { liveDiskName, machineNameOf, memoryMbFor, type SandboxPaths } from "./sandbox-paths.js";

const GiB = 1024 ** 3;

/** Said of a nested sandbox of several vCPUs on an emulated host (measured: scripts/kvm/nested-stress.sh). */
const NESTED_SMP_TCG =
  "warning: nested virtualization with several vCPUs on an emulated (tcg) host: under load its KVM has reset the guest; with one vCPU it has not";

/** The messages of an error's causes, outermost first (for the log: users get the error's own message). */
export function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 5; e = e.cause) parts.push(e.message);
  return parts.join(" <- ");
}

/** Where a machine's start went, for its `running` event: ": launched 310 ms, ..., agent 520 ms, 1 HELLO" after "running (tcg, pid N)" (the host names the steps). */
function startSteps(marks: Readonly<Record<string, number>> | undefined): string {
  if (!marks) return "";
  const steps = Object.entries(marks).filter(([k]) => k !== "hellos");
  const hellos = marks.hellos === undefined ? [] : [`${marks.hellos} HELLO${marks.hellos === 1 ? "" : "s"}`];
  return `: ${[...steps.map(([k, v]) => `${k} ${v} ms`), ...hellos].join(", ")}`;
}

/** A verified checkpoint a sandbox starts from (resolved once, by the restore service). */
export interface RestoreLayers {
  /** The checkpoint's top layer, by file name in the layers directory. */
  layerName: string;
  digest: string | null;
  /** Its memory state, by name in the layers directory, when the sandbox resumes with processes running. */
  memState: string | null;
}

export interface ProvisionerDeps {
  store: Store;
  images: ImageResolver;
  paths: SandboxPaths;
  machines: SandboxMachines;
  host: MachineHost;
  accel: Accel;
  guest: GuestArtifacts;
  log: Logger;
  network?: NetworkService;
  /** Warm templates; null turns warm starts off. */
  templates: TemplateStore | null;
  /** Memory checkpoints as RAM files children map copy-on-write; null loads each stream whole. */
  memoryImages?: MemoryImages | null;
  /** What every exec and the start command get. */
  environmentOf: (sb: Sandbox) => Promise<Record<string, string>>;
}

/**
 * Gets a sandbox from PENDING to RUNNING: its disk (a writable disk on the image base or on a
 * checkpoint's layer), its network, and its machine (a warm template clone, a memory restore or a
 * cold boot); and replaces a running sandbox's machine for an episode reset.
 */
export class Provisioner {
  private readonly imageBases = new Map<string, string>();

  constructor(private readonly deps: ProvisionerDeps) {}

  /** The name of the image base under a sandbox's disk chain. */
  async baseOf(sb: Sandbox): Promise<string> {
    return this.imageBases.get(sb.id) ?? (await this.deps.images.resolve(sb.image, {})).base;
  }

  forget(id: string): void {
    this.imageBases.delete(id);
  }

  /** The warm template a start of this shape clones, or null when warm starts are off. */
  templateInputs(cpuCores: number, memoryMb: number, nested = false): TemplateInputs | null {
    if (!this.deps.templates) return null;
    return {
      kernel: this.deps.guest.kernel,
      initramfs: this.deps.guest.initramfs,
      accel: this.deps.accel,
      cpuCores,
      memoryMb,
      nic: this.deps.network?.enabled ?? false,
      ...(nested ? { nested: true } : {}),
    };
  }

  /**
   * The template a start clones: the image's own template (root mounted, image pages cached:
   * the fastest) when there is one for this image, disk size and shape; else the shape template
   * (any image, fork or restore: the clone mounts its own disk); else none (a cold boot). `build`
   * lists the templates missing for next time: a start never waits for a build.
   */
  private pickTemplate(
    cpuCores: number,
    memoryMb: number,
    nested: boolean,
    image: TemplateInputs["image"] | null,
  ): { template: Template | null; build: TemplateInputs[] } {
    const templates = this.deps.templates;
    const shape = this.templateInputs(cpuCores, memoryMb, nested);
    if (!templates || !shape) return { template: null, build: [] };
    const build: TemplateInputs[] = [];
    if (image) {
      const own = { ...shape, image };
      const t = templates.get(own);
      if (t) return { template: t, build };
      build.push(own);
    }
    const t = templates.get(shape);
    if (!t) build.unshift(shape);
    return { template: t, build };
  }

  /** The machine a sandbox's memory state loads into (its CPUs, memory, guest and NIC). */
  private memoryShape(sb: Sandbox): MemoryShape {
    return {
      accel: this.deps.accel,
      cpuCores: sb.cpu_cores,
      memoryMb: memoryMbFor(sb.memory_gb),
      kernel: this.deps.guest.kernel,
      initramfs: this.deps.guest.initramfs,
      nic: this.deps.network?.enabled ?? false,
      ...(sb.nested_virtualization ? { nested: true } : {}),
    };
  }

  /**
   * How a machine resumes a memory checkpoint: a copy-on-write clone of the checkpoint's memory
   * image (built when the checkpoint was taken, see prepareMemoryImage, or at the first start
   * that needs it; shared by the rest), or a load of the whole stream where there is no image.
   */
  private async memoryStart(
    sb: Sandbox,
    memState: string,
    signal?: AbortSignal,
  ): Promise<Pick<MachineSpec, "template" | "memoryState">> {
    const image = await this.deps.memoryImages?.ensure(memState, this.memoryShape(sb), signal);
    return image ? { template: { ramFile: image.ramFile, stateFile: image.stateFile } } : { memoryState: memState };
  }

  /** Starts building the memory image of a state just saved from `sb`, in the background. */
  prepareMemoryImage(sb: Sandbox, memState: string): void {
    this.deps.memoryImages?.prepare(memState, this.memoryShape(sb));
  }

  /** Builds a template in the background (a start never waits for one: it boots cold). */
  prewarm(inputs: TemplateInputs): void {
    const templates = this.deps.templates;
    if (!templates) return;
    setImmediate(() => {
      // A failure is logged with its reason by the store's onTemplateError (warm-starts.ts).
      void templates.ensure(inputs);
    });
  }

  /** The sandbox's disk and network rates: its team's (a default, or the team's own setting). */
  private async ratesOf(sb: Sandbox) {
    return ratesOf({ ...DEFAULT_TEAM_LIMITS, ...(await this.deps.store.getTeamLimitOverrides(sb.team_id)) });
  }

  private async spec(sb: Sandbox, rootDisk: string) {
    return {
      rates: await this.ratesOf(sb),
      name: machineNameOf(sb.id),
      accel: this.deps.accel,
      cpuCores: sb.cpu_cores,
      memoryMb: memoryMbFor(sb.memory_gb),
      kernel: this.deps.guest.kernel,
      initramfs: this.deps.guest.initramfs,
      rootDisk,
      ...(sb.nested_virtualization ? { nested: true } : {}),
    };
  }

  async provision(
    sb: Sandbox,
    credentials: CreateSandboxParams["registry_credentials"],
    restore: RestoreLayers | null,
    signal: AbortSignal,
  ): Promise<void> {
    const { store, log, machines } = this.deps;
    if (!(await store.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"]))) return;
    let machine: Machine | null = null;
    try {
      // The disk lives among the checkpoint layers in the host's layers directory, named there,
      // over the checkpoint's layer or a link to the image base. A later checkpoint keeps it in place.
      let backing: string;
      let image: { digest: string | null; virtualSizeBytes: number };
      let defaults: ReturnType<typeof imageDefaults>["patch"] = {};
      if (restore) {
        backing = restore.layerName;
        image = { digest: restore.digest, virtualSizeBytes: 0 };
      } else {
        const resolved = await this.deps.images.resolve(sb.image, { ...(credentials ? { credentials } : {}), signal });
        this.imageBases.set(sb.id, resolved.base);
        backing = await this.deps.host.linkBase(resolved.base);
        image = resolved;
        // What the image says it needs, where the create did not say otherwise.
        const found = imageDefaults(sb, resolved.labels);
        for (const why of found.ignored) log.warn({ sandbox: sb.id, image: sb.image }, why);
        defaults = found.patch;
        Object.assign(sb, defaults);
      }
      const memState = restore?.memState ?? null;
      await store.updateSandbox(sb.id, { image_digest: image.digest, ...defaults });
      for (const [field, value] of Object.entries(defaults)) await store.addEvent(sb.id, `${field} from the image: ${value}`);
      // Boot progress for `sandtree sandbox logs` (the console of a quiet kernel says little).
      await store.addEvent(
        sb.id,
        sb.source_checkpoint_id
          ? `disk from checkpoint ${sb.source_checkpoint_id}`
          : `image ready (${image.digest?.slice(0, 19) ?? "no digest"})`,
      );
      const diskBytes = sb.disk_size_gb * GiB;
      if (diskBytes < image.virtualSizeBytes) {
        throw new SandtreeError(
          "VALIDATION_FAILED",
          `disk_size_gb ${sb.disk_size_gb} is smaller than the image (${(image.virtualSizeBytes / GiB).toFixed(2)} GiB)`,
          { field: "disk_size_gb" },
        );
      }
      const memoryMb = memoryMbFor(sb.memory_gb);
      // Warm start: a copy-on-write clone of a booted template (see pickTemplate). A memory
      // restore brings its own RAM.
      const warm = memState
        ? { template: null, build: [] }
        : this.pickTemplate(
            sb.cpu_cores,
            memoryMb,
            sb.nested_virtualization === true,
            restore || !image.digest ? null : { digest: image.digest, backing, diskBytes },
          );
      const template = warm.template;
      const rootDisk = liveDiskName(sb.id, "0");
      // The disk and the network (tap, rules, tunnels) are set up side by side.
      // Both settle before a failure is thrown, so the cleanup below sees everything they made.
      const [disk, net] = await Promise.allSettled([
        this.deps.host.createDisk(template?.diskName ?? backing, rootDisk, diskBytes, { signal }),
        this.deps.network?.attach(sb.id),
      ]);
      if (disk.status === "rejected") throw disk.reason;
      if (net.status === "rejected") throw net.reason;
      const nic = net.value;
      signal.throwIfAborted();
      // A memory start maps the checkpoint's RAM image (built at its first start) or, without one,
      // loads the whole saved stream; the event says which (the second costs a full RAM copy).
      const resume = memState ? await this.memoryStart(sb, memState, signal) : null;
      const how = resume
        ? `restoring its memory (${resume.template ? "copy-on-write RAM image" : "whole saved stream"})`
        : template
          ? `warm start from the ${template.rootWait ? "shape" : "image"} template`
          : "cold boot";
      await store.addEvent(sb.id, `starting the VM (${how}, ${sb.cpu_cores} cpu, ${memoryMb} MiB)`);
      if (sb.nested_virtualization && sb.cpu_cores > 1 && this.deps.accel === "tcg") await store.addEvent(sb.id, NESTED_SMP_TCG);
      machine = await this.deps.host.start({
        ...(await this.spec(sb, rootDisk)),
        ...(nic ? { nic: { tap: nic.tap, guestNet: nic.guestNet } } : {}),
        signal,
        ...(template
          ? { template: { ramFile: template.ramFile, stateFile: template.stateFile, rootWait: template.rootWait } }
          : {}),
        ...(resume ?? {}),
      });
      // Templates missing for this start build afterwards, in the background.
      for (const inputs of warm.build) this.prewarm(inputs);
      const started = machine;
      machines.supervise(sb.id, started, "PROVISIONING");
      if (sb.start_command) await this.runStartCommand(sb, started);
      // One write: the start path goes with the status (metrics read both at RUNNING).
      const startPath = memState ? "memory" : template ? "warm" : "cold";
      if (
        !(await store.updateSandbox(sb.id, { status: "RUNNING", started_at: new Date().toISOString(), start_path: startPath }, [
          "PROVISIONING",
        ]))
      ) {
        throw new SandtreeError("SANDBOX_NOT_RUNNING", "sandbox was deleted while provisioning", { id: sb.id });
      }
      await store.addEvent(sb.id, `running (${this.deps.accel}, pid ${started.pid})${startSteps(started.startMarks)}`);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (machine) {
        machines.take(sb.id);
        await machine.stop({ graceMs: 0 }).catch(() => {});
      }
      await machines.cleanupDisk(sb.id);
      await machines.discard(sb.id);
      await this.deps.network?.detach(sb.id).catch(() => {});
      if (await store.updateSandbox(sb.id, errorEnd("START_FAILED", reason), ["PENDING", "PROVISIONING"])) {
        await store.addEvent(sb.id, `error: ${reason}`);
        // The user's reason is a sentence; what the host or a tool said is here.
        log.warn({ sandbox: sb.id, reason, detail: causeChain(err) }, "provisioning failed");
      }
    }
  }

  /**
   * Replaces a sandbox's machine by one resumed from a memory checkpoint (its disk on the
   * checkpoint's layer), keeping the sandbox's id and network. The caller took the old machine.
   */
  async replaceForReset(sb: Sandbox, old: Machine, layers: { layerName: string; memState: string }): Promise<void> {
    const { machines } = this.deps;
    // The checkpoint's memory image is made (once) before the old machine goes.
    const resume = await this.memoryStart(sb, layers.memState);
    await old.stop({ graceMs: 0 });
    await machines.cleanupDisk(sb.id);
    const disk = liveDiskName(sb.id, `r${Date.now().toString(36)}`);
    await this.deps.host.createDisk(layers.layerName, disk, sb.disk_size_gb * GiB);
    const tap = this.deps.network?.tapOf(sb.id);
    const guestNet = this.deps.network?.guestNetOf(sb.id);
    const machine = await this.deps.host.start({
      ...(await this.spec(sb, disk)),
      ...(tap && guestNet ? { nic: { tap, guestNet } } : {}),
      ...resume,
    });
    machines.supervise(sb.id, machine, "RUNNING");
  }

  /** Launches the start command (resolves once launched; its output is written in the background). */
  private async runStartCommand(sb: Sandbox, machine: Machine): Promise<void> {
    const env = await this.deps.environmentOf(sb);
    const logDir = this.deps.paths.logDir(sb.id);
    mkdirSync(logDir, { recursive: true });
    const out = createWriteStream(path.join(logDir, "start-command.log"));
    const exec = machine.exec({ shell: sb.start_command ?? "", env });
    await this.deps.store.addEvent(sb.id, "start command launched");
    (async () => {
      for await (const ev of exec.events) {
        if (ev.type === "stdout" || ev.type === "stderr") {
          if (!out.write(ev.data)) await new Promise<void>((r) => out.once("drain", () => r()));
        } else if (ev.type === "exit") {
          await this.deps.store.addEvent(sb.id, `start command exited with ${ev.info.exit_code}`);
        }
      }
    })()
      .catch(() => {})
      .finally(() => out.end());
  }
}
