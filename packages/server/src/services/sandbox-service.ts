import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import {
  type Accel,
  createOverlay,
  ensureBaseLink,
  findQemuProcesses,
  type GuestArtifacts,
  QemuVm,
  QmpTimeoutError,
  qemuAlive,
  type TemplateInputs,
  TemplateStore,
  tailOfFile,
} from "@sandtree/host";
import { type CreateSandboxParams, type Sandbox, type SandboxStatus, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { Store } from "../store/store.js";
import type { AdmissionService } from "./admission-service.js";
import type { ImageResolver } from "./image-resolver.js";
import { lifetimeFields } from "./lifetime.js";
import type { Logger } from "./logger.js";
import type { NetworkService } from "./network-service.js";

/** How sandboxes restore from checkpoints and tell the checkpoint service they are going away. */
export interface CheckpointHooks {
  /** Verifies the checkpoint's chain; `layerName` is its top layer's file name in the layers directory. */
  backing(
    checkpointId: string,
    signal: AbortSignal,
    opts?: { memory?: boolean },
  ): Promise<{ digest: string | null; layerName: string; memPath: string | null }>;
  onTeardown(sandboxId: string): Promise<void>;
}

/** The VM's RAM for a sandbox's memory_gb (a memory checkpoint records it: restores must match). */
export function memoryMbFor(memoryGb: number): number {
  return Math.max(128, Math.round(memoryGb * 1024));
}

/** File name of one of a sandbox's disk layers (the active one, or frozen ones that became checkpoints). */
export function liveDiskName(sandboxId: string, generation: string): string {
  return `live-${sandboxId}-${generation}${generation ? ".qcow2" : ""}`;
}

/** Statuses with a VM (or one on its way). PAUSED keeps its VM but counts toward no quota. */
const ACTIVE: readonly SandboxStatus[] = ["PENDING", "PROVISIONING", "RUNNING", "PAUSED"];
const GiB = 1024 ** 3;

export interface SandboxServiceDeps {
  store: Store;
  images: ImageResolver;
  dataDir: string;
  /** Short directory for Unix sockets (path length limit). */
  runRoot: string;
  accel: Accel;
  guest: GuestArtifacts;
  log: Logger;
  admission: AdmissionService;
  /** Sandbox networks (absent: no sandbox gets a NIC). */
  network?: NetworkService;
  /** Deadlines of calls into VMs (ms); see VmDeadlines in server.ts. Absent: the defaults. */
  deadlines?: { adoptMs?: number; qmpMs?: number; agentMs?: number };
}

function newId(): string {
  // 16 base32 characters: short enough for socket paths, 80 bits of randomness.
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  const bytes = randomBytes(16);
  let id = "sb-";
  for (const b of bytes) id += alphabet[b & 31];
  return id;
}

/**
 * Sandbox lifecycle as a state machine in the store: PENDING -> PROVISIONING -> RUNNING ->
 * TERMINATED, or ERROR/TIMEOUT. Every transition is conditional on the current status, so a
 * delete racing a create wins and the provisioner cleans up what it started.
 */
export class SandboxService {
  private readonly vms = new Map<string, QemuVm>();
  private readonly provisioning = new Map<string, { abort: AbortController; done: Promise<void> }>();
  /** Sandboxes whose surviving VM is being reconnected after a restart (see reconcile()). */
  private readonly adopting = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private closing = false;

  private checkpointHooks: CheckpointHooks | null = null;
  /** Warm templates; null turns warm starts off (SANDTREE_WARM_TEMPLATES=0). */
  private readonly templates: TemplateStore | null;
  private readonly imageBases = new Map<string, string>();
  /** Sandboxes to restore with their checkpoint's memory (processes running) instead of booting. */
  private readonly memoryRestores = new Set<string>();
  private readonly resetting = new Set<string>();
  /** Liveness watchdog: holds (freezes, saves) per sandbox, and an epoch bumped on every hold or pause. */
  private readonly watchHolds = new Map<string, number>();
  private readonly watchEpoch = new Map<string, number>();
  /** Sandboxes whose VM QEMU paused on a host disk error, with the reason. */
  private readonly ioErrors = new Map<string, string>();
  /** Emits ("io-error", sandboxId, reason) when QEMU pauses a VM on a disk error. */
  readonly ioEvents = new EventEmitter().setMaxListeners(0);

  constructor(private readonly deps: SandboxServiceDeps) {
    this.templates =
      process.env.SANDTREE_WARM_TEMPLATES === "0"
        ? null
        : new TemplateStore(
            this.layersDir,
            path.join(deps.dataDir, "templates"),
            deps.runRoot,
            deps.network ? deps.network.taps : null,
          );
  }

  /** One adoption, all steps (SANDTREE_ADOPT_DEADLINE_MS, 10 s). */
  private get adoptDeadlineMs(): number {
    return this.deps.deadlines?.adoptMs ?? 10_000;
  }
  /** One QMP command of the API's own calls (pause, resume, delete: SANDTREE_QMP_DEADLINE_MS, 15 s). */
  get qmpDeadlineMs(): number {
    return this.deps.deadlines?.qmpMs ?? 15_000;
  }

  /** Wired by the checkpoint service (it needs this service too, so it is set after both exist). */
  setCheckpointHooks(hooks: CheckpointHooks): void {
    this.checkpointHooks = hooks;
  }

  /** The image base under a sandbox's disk chain. */
  /**
   * Removes warm templates no create can use any more (another kernel, agent or device model,
   * a vanished image base, a build a crash cut short); disks that sandboxes or checkpoints still
   * sit on stay until they are free. Run at start, before requests are taken.
   */
  pruneTemplates(): void {
    if (!this.templates) return;
    try {
      const r = this.templates.prune();
      if (r.removed.length > 0 || r.keptDisks.length > 0)
        this.deps.log.info(
          { removed: r.removed.length, freedMiB: Math.round(r.freedBytes / 1048576), disksStillInUse: r.keptDisks.length },
          "stale warm templates pruned",
        );
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message }, "could not prune warm templates");
    }
  }

  async basePathOf(sb: Sandbox): Promise<string> {
    return this.imageBases.get(sb.id) ?? (await this.deps.images.resolve(sb.image, {})).basePath;
  }

  private sandboxDir(id: string): string {
    return path.join(this.deps.dataDir, "sandboxes", id);
  }
  private diskDir(id: string): string {
    return path.join(this.sandboxDir(id), "disk");
  }
  private logDir(id: string): string {
    return path.join(this.sandboxDir(id), "logs");
  }
  private runDir(id: string): string {
    return path.join(this.deps.runRoot, id);
  }

  async create(teamId: string, params: CreateSandboxParams): Promise<Sandbox> {
    return (await this.createOrReplay(teamId, params)).sandbox;
  }

  /** Creates a sandbox, or answers the one an unexpired idempotency key already created (`created: false`). */
  async createOrReplay(teamId: string, params: CreateSandboxParams): Promise<{ sandbox: Sandbox; created: boolean }> {
    if (this.closing) throw new SandtreeError("UNAVAILABLE", "the server is shutting down");
    const replayed = this.deps.admission.replay(teamId, params);
    if (replayed) return { sandbox: replayed, created: false };
    const credentials = params.registry_credentials;
    // A restore's image comes from its checkpoint, which the route has verified.
    if (!params.checkpoint_id) await this.deps.images.check(params.image, credentials ? { credentials } : {});
    this.deps.network?.validate(params);
    const now = new Date().toISOString();
    const sandbox: Sandbox = {
      id: newId(),
      name: params.name ?? null,
      team_id: teamId,
      image: params.image,
      image_digest: null,
      status: "PENDING",
      cpu_cores: params.cpu_cores,
      memory_gb: params.memory_gb,
      disk_size_gb: params.disk_size_gb,
      environment_vars: params.environment_vars,
      labels: params.labels,
      start_command: params.start_command ?? null,
      accel: this.deps.accel,
      error_reason: null,
      created_at: now,
      updated_at: now,
      started_at: null,
      terminated_at: null,
      ...lifetimeFields(params, now),
    };
    // Quotas, rate limits and idempotency are checked in the insert's transaction.
    const admitted = this.deps.admission.admit(sandbox, params);
    if (!admitted.created) return admitted;
    this.deps.network?.register(sandbox.id, params);
    sandbox.secrets = admitted.sandbox.secrets ?? {};
    this.deps.store.updateSandbox(sandbox.id, lifetimeFields(params, now));
    if (params.checkpoint_id) {
      if (params.restore_memory) this.memoryRestores.add(sandbox.id);
      const lineage = { source_checkpoint_id: params.checkpoint_id, head_checkpoint_id: params.checkpoint_id };
      this.deps.store.updateSandbox(sandbox.id, lineage);
      Object.assign(sandbox, lineage);
    }
    this.deps.store.addEvent(sandbox.id, `created from ${params.image}`);
    const abort = new AbortController();
    const done = this.provision(sandbox, credentials, abort.signal).finally(() => {
      this.provisioning.delete(sandbox.id);
      this.memoryRestores.delete(sandbox.id);
    });
    this.provisioning.set(sandbox.id, { abort, done });
    return { sandbox, created: true };
  }

  /** What every exec and the start command get: environment_vars, then the decrypted secrets. */
  environmentOf(sb: Sandbox): Record<string, string> {
    return { ...sb.environment_vars, ...this.deps.admission.secretsOf(sb.id) };
  }

  private async provision(
    sb: Sandbox,
    credentials: CreateSandboxParams["registry_credentials"],
    signal: AbortSignal,
  ): Promise<void> {
    const { store, log } = this.deps;
    if (!store.updateSandbox(sb.id, { status: "PROVISIONING" }, ["PENDING"])) return;
    let vm: QemuVm | null = null;
    try {
      // The overlay lives among the checkpoint layers and names its backing relatively: the
      // checkpoint's layer, or a link to the image base. A later checkpoint keeps it in place.
      mkdirSync(this.layersDir, { recursive: true });
      let backing: string;
      let memState: string | null = null;
      let image: { digest: string | null; virtualSizeBytes: number };
      if (sb.source_checkpoint_id && this.checkpointHooks) {
        const layer = await this.checkpointHooks.backing(sb.source_checkpoint_id, signal, {
          memory: this.memoryRestores.has(sb.id),
        });
        backing = layer.layerName;
        memState = layer.memPath;
        image = { digest: layer.digest, virtualSizeBytes: 0 };
      } else {
        const resolved = await this.deps.images.resolve(sb.image, { ...(credentials ? { credentials } : {}), signal });
        this.imageBases.set(sb.id, resolved.basePath);
        backing = ensureBaseLink(this.layersDir, resolved.basePath);
        image = resolved;
      }
      store.updateSandbox(sb.id, { image_digest: image.digest });
      // Boot progress for `sandtree sandbox logs` (the console of a quiet kernel says little).
      store.addEvent(
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
      // Warm start: a copy-on-write clone of a saved, booted VM of the same image and sizes.
      // Restores boot cold (their disk is a checkpoint's, not the template's).
      const warmInputs: TemplateInputs | null =
        this.templates && !sb.source_checkpoint_id && image.digest
          ? {
              imageDigest: image.digest,
              backing,
              kernel: this.deps.guest.kernel,
              initramfs: this.deps.guest.initramfs,
              accel: this.deps.accel,
              cpuCores: sb.cpu_cores,
              memoryMb,
              diskBytes,
              nic: this.deps.network?.enabled ?? false,
            }
          : null;
      const template = warmInputs ? this.templates?.get(warmInputs) : null;
      const overlay = path.join(this.layersDir, liveDiskName(sb.id, "0"));
      // The disk and the network (tap, rules, tunnels) are set up side by side.
      // Both settle before a failure is thrown, so the cleanup below sees everything they made.
      const [disk, net] = await Promise.allSettled([
        createOverlay(template ? template.diskName : backing, overlay, diskBytes, { signal }),
        this.deps.network?.attach(sb.id),
      ]);
      if (disk.status === "rejected") throw disk.reason;
      if (net.status === "rejected") throw net.reason;
      const nic = net.value;
      signal.throwIfAborted();
      const how = memState ? "restoring its memory" : template ? "warm start from a booted template" : "cold boot";
      store.addEvent(sb.id, `starting the VM (${how}, ${sb.cpu_cores} cpu, ${memoryMb} MiB)`);
      vm = await QemuVm.start({
        ...(nic ? { tap: nic.tap, guestNet: nic.guestNet } : {}),
        name: `sandtree-${sb.id}`,
        accel: this.deps.accel,
        cpuCores: sb.cpu_cores,
        memoryMb,
        kernel: this.deps.guest.kernel,
        initramfs: this.deps.guest.initramfs,
        rootDisk: overlay,
        runDir: this.runDir(sb.id),
        logDir: this.logDir(sb.id),
        signal,
        ...(template ? { memoryFile: { path: template.ramFile, share: false }, restoreFrom: template.stateFile } : {}),
        ...(memState ? { restoreFrom: memState } : {}),
      });
      store.updateSandbox(sb.id, { start_path: memState ? "memory" : template ? "warm" : "cold" });
      // The first create of a kind boots cold; the template for the next ones builds afterwards.
      if (warmInputs && !template) setImmediate(() => void this.templates?.ensure(warmInputs));
      const started = vm;
      this.supervise(sb.id, started);
      if (sb.start_command) this.runStartCommand(sb, started);
      if (!store.updateSandbox(sb.id, { status: "RUNNING", started_at: new Date().toISOString() }, ["PROVISIONING"])) {
        throw new Error("sandbox was deleted while provisioning");
      }
      store.addEvent(sb.id, `running (${this.deps.accel}, pid ${started.pid})`);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (vm) {
        this.vms.delete(sb.id);
        await vm.stop({ graceMs: 0 }).catch(() => {});
      }
      this.cleanupDisk(sb.id);
      rmSync(this.runDir(sb.id), { recursive: true, force: true });
      await this.deps.network?.detach(sb.id).catch(() => {});
      if (
        store.updateSandbox(sb.id, { status: "ERROR", error_reason: reason, terminated_at: new Date().toISOString() }, [
          "PENDING",
          "PROVISIONING",
        ])
      ) {
        store.addEvent(sb.id, `error: ${reason}`);
        log.warn({ sandbox: sb.id, reason }, "provisioning failed");
      }
    }
  }

  /** Tracks a sandbox's VM; if QEMU dies on its own the sandbox becomes ERROR with the reason. */
  /**
   * Episode reset in place: the sandbox's VM is replaced by one resumed from a memory checkpoint
   * (its disk on the checkpoint's layer), keeping the sandbox's id. The guest gets the host clock
   * and fresh entropy on reconnect, as after every restore.
   */
  async reset(
    teamId: string,
    id: string,
    r: { checkpointId: string; layerName: string; memPath: string; memoryMb: number | null; cpuCores: number | null },
  ): Promise<Sandbox> {
    const sb = this.get(teamId, id);
    const old = this.running(teamId, id);
    if (r.memoryMb !== memoryMbFor(sb.memory_gb) || r.cpuCores !== sb.cpu_cores) {
      throw new SandtreeError("CONFLICT", `checkpoint ${r.checkpointId} was taken from a VM of another size than sandbox ${id}`, {
        checkpoint_id: r.checkpointId,
      });
    }
    if (this.resetting.has(id)) throw new SandtreeError("CONFLICT", `sandbox ${id} is already being reset`, { id });
    this.resetting.add(id);
    try {
      // Out of the map first: calls during the swap get 409 instead of a dying VM.
      this.vms.delete(id);
      await old.stop({ graceMs: 0 });
      this.cleanupDisk(id);
      const overlay = path.join(this.layersDir, liveDiskName(id, `r${Date.now().toString(36)}`));
      await createOverlay(r.layerName, overlay, sb.disk_size_gb * GiB);
      const tap = this.deps.network?.tapOf(id);
      const guestNet = this.deps.network?.guestNetOf(id);
      const vm = await QemuVm.start({
        ...(tap && guestNet ? { tap, guestNet } : {}),
        name: `sandtree-${id}`,
        accel: this.deps.accel,
        cpuCores: sb.cpu_cores,
        memoryMb: memoryMbFor(sb.memory_gb),
        kernel: this.deps.guest.kernel,
        initramfs: this.deps.guest.initramfs,
        rootDisk: overlay,
        runDir: this.runDir(id),
        logDir: this.logDir(id),
        restoreFrom: r.memPath,
      });
      this.supervise(id, vm);
      this.deps.store.updateSandbox(id, { head_checkpoint_id: r.checkpointId });
      this.deps.store.addEvent(id, `reset to checkpoint ${r.checkpointId}`);
    } catch (err) {
      const reason = `reset failed: ${(err as Error).message}`;
      if (
        this.deps.store.updateSandbox(
          id,
          { status: "ERROR", error_reason: reason, terminated_at: new Date().toISOString() },
          ACTIVE,
        )
      ) {
        this.deps.store.addEvent(id, `error: ${reason}`);
      }
      this.cleanupDisk(id);
      throw new SandtreeError("VM_START_FAILED", reason, { id });
    } finally {
      this.resetting.delete(id);
    }
    return this.get(teamId, id);
  }

  private supervise(id: string, vm: QemuVm): void {
    const { store, log } = this.deps;
    this.vms.set(id, vm);
    vm.on("exit", (exit: { expected: boolean; reason: string }) => {
      if (this.vms.get(id) === vm) this.vms.delete(id);
      if (exit.expected) return;
      log.warn({ sandbox: id, reason: exit.reason }, "sandbox VM died");
      try {
        if (
          store.updateSandbox(id, { status: "ERROR", error_reason: exit.reason, terminated_at: new Date().toISOString() }, ACTIVE)
        ) {
          store.addEvent(id, `error: ${exit.reason}`);
        }
      } catch (err) {
        // The database cannot write (host disk full): a restart's reconcile finds the VM gone.
        log.error({ sandbox: id, err: (err as Error).message }, "could not record the VM's death");
      }
      this.cleanupDisk(id);
      rmSync(this.runDir(id), { recursive: true, force: true });
      // A reset replaces the VM and keeps the network; a VM that died on its own gives it back.
      if (!this.resetting.has(id)) void this.deps.network?.detach(id).catch(() => {});
    });
    this.watchAgent(id, vm);
    this.watchDiskErrors(id, vm);
  }

  /**
   * A guest that stops answering (QEMU stopped or hung) would leave every call waiting forever:
   * its agent is pinged every few seconds (one ping at a time), and a ping that stays unanswered
   * for SANDTREE_AGENT_DEADLINE_MS (30 s) makes the sandbox ERROR and kills its QEMU, which fails
   * the calls in flight with GUEST_ERROR. A ping counts as missed only if, for its whole life, the
   * sandbox was RUNNING, the agent connected, and nothing held the guest still on purpose (a
   * checkpoint's freeze or memory save, a pause, a reset, QEMU's own pause on a host disk error):
   * a slow guest under heavy load answers late, but answers.
   */
  private watchAgent(id: string, vm: QemuVm): void {
    const deadlineMs = this.deps.deadlines?.agentMs ?? Number(process.env.SANDTREE_AGENT_DEADLINE_MS ?? 30_000);
    if (!(deadlineMs > 0)) return;
    let inFlight = false;
    const quiet = () =>
      this.deps.store.getSandbox(id)?.status !== "RUNNING" ||
      (this.watchHolds.get(id) ?? 0) > 0 ||
      this.ioErrors.has(id) ||
      !vm.agent ||
      vm.agent.isClosed;
    const timer = setInterval(
      () => {
        if (vm.exit || this.vms.get(id) !== vm) return clearInterval(timer);
        if (inFlight || quiet()) return;
        inFlight = true;
        const agent = vm.agent;
        const epoch = this.watchEpoch.get(id) ?? 0;
        let settled = false;
        const miss = setTimeout(() => {
          settled = true;
          inFlight = false;
          const counted =
            !vm.exit && this.vms.get(id) === vm && vm.agent === agent && !quiet() && (this.watchEpoch.get(id) ?? 0) === epoch;
          if (!counted) return;
          clearInterval(timer);
          void this.failUnresponsive(id, vm, deadlineMs);
        }, deadlineMs);
        miss.unref();
        // A closed connection is not a miss: the exit supervision or a reconnect deals with it.
        agent
          .ping()
          .catch(() => {})
          .finally(() => {
            if (settled) return;
            clearTimeout(miss);
            inFlight = false;
          });
      },
      Math.min(5000, Math.max(200, deadlineMs / 4)),
    );
    timer.unref();
    vm.once("exit", () => clearInterval(timer));
  }

  /**
   * Tells the liveness watchdog that the guest is held still on purpose (a freeze, a memory save)
   * until the returned function is called; a ping in flight across a hold is never counted.
   */
  holdWatchdog(id: string): () => void {
    this.watchHolds.set(id, (this.watchHolds.get(id) ?? 0) + 1);
    this.bumpWatch(id);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.watchHolds.get(id) ?? 1) - 1;
      if (n > 0) this.watchHolds.set(id, n);
      else this.watchHolds.delete(id);
      this.bumpWatch(id);
    };
  }

  private bumpWatch(id: string): void {
    this.watchEpoch.set(id, (this.watchEpoch.get(id) ?? 0) + 1);
  }

  /** Why QEMU paused this sandbox's VM on a disk error (host disk full), or undefined. */
  ioErrorOf(id: string): string | undefined {
    return this.ioErrors.get(id);
  }

  /**
   * QEMU pauses a VM whose disk write fails with ENOSPC (werror=enospc, its default and ours: the
   * guest never sees an error and loses nothing) while our status still says RUNNING. Made
   * visible: the sandbox's events say so, new calls get 507 HOST_DISK_FULL at once, waiting
   * checkpoints fail (ioEvents), and the VM is continued every few seconds, which retries the
   * failed write: once the host has space again it runs on by itself.
   */
  private watchDiskErrors(id: string, vm: QemuVm): void {
    const qmp = vm.qmp;
    if (!qmp) return;
    let retry: NodeJS.Timeout | null = null;
    const stopRetry = () => {
      if (retry) clearInterval(retry);
      retry = null;
    };
    let pausedAt = "";
    let recorded = false;
    const cleared = () => {
      stopRetry();
      const reason = this.ioErrors.get(id);
      if (!reason || !this.ioErrors.delete(id)) return;
      this.bumpWatch(id);
      // The pause itself could not be recorded while the disk was full: say so now.
      if (!recorded) this.eventSafely(id, `paused from ${pausedAt}: ${reason}`);
      this.eventSafely(id, "running again after the host disk error");
      this.deps.log.info({ sandbox: id }, "sandbox VM resumed after a host disk error");
    };
    const onEvent = (ev: { event?: string; data?: Record<string, unknown> }) => {
      if (this.vms.get(id) !== vm) return;
      if (ev.event === "BLOCK_IO_ERROR" && ev.data?.action === "stop") {
        const reason = `QEMU paused the VM on a disk ${String(ev.data.operation ?? "I/O")} error: ${String(ev.data.reason ?? "unknown")}${ev.data.nospace ? " (the host's data disk is full)" : ""}`;
        if (!this.ioErrors.has(id)) {
          this.ioErrors.set(id, reason);
          this.bumpWatch(id);
          this.ioEvents.emit("io-error", id, reason);
          this.deps.log.warn({ sandbox: id, reason }, "sandbox VM paused on a host disk error");
          pausedAt = new Date().toISOString();
          recorded = this.eventSafely(id, `paused: ${reason}; it runs on once the host has space`);
        }
        retry ??= setInterval(() => {
          if (vm.exit || this.vms.get(id) !== vm) return stopRetry();
          qmp
            .execute<{ status?: string }>("query-status", undefined, { timeoutMs: 2000 })
            .then((st) => {
              if (st.status === "io-error") return qmp.execute("cont", undefined, { timeoutMs: 2000 });
              if (st.status === "running") cleared();
              return undefined;
            })
            .catch(() => {});
        }, 2000);
        retry.unref();
      } else if (ev.event === "RESUME" && this.ioErrors.has(id)) cleared();
    };
    qmp.on("event", onEvent);
    // A VM adopted after a restart may already be paused on a disk error (its event is gone).
    qmp
      .execute<{ status?: string }>("query-status", undefined, { timeoutMs: 5000 })
      .then((st) => {
        if (st.status === "io-error" && !this.ioErrors.has(id)) {
          onEvent({ event: "BLOCK_IO_ERROR", data: { action: "stop", operation: "I/O", reason: "found paused on it" } });
        }
      })
      .catch(() => {});
    vm.once("exit", () => {
      stopRetry();
      this.ioErrors.delete(id);
    });
  }

  private async failUnresponsive(id: string, vm: QemuVm, deadlineMs: number): Promise<void> {
    // QMP still answers when only the guest is stuck; its run state says why.
    const state = await vm.qmp
      ?.execute<{ status?: string }>("query-status", undefined, { timeoutMs: 1000 })
      .then((s) => s.status)
      .catch(() => undefined);
    this.failVm(
      id,
      vm,
      `guest agent stopped answering for ${Math.round(deadlineMs / 1000)} s (VM state: ${state ?? "no answer"}); the VM was stopped`,
    );
  }

  /** An event row, when the database can take one (the host disk may be full). */
  private eventSafely(id: string, message: string): boolean {
    try {
      this.deps.store.addEvent(id, message);
      return true;
    } catch (err) {
      this.deps.log.warn({ sandbox: id, event: message, err: (err as Error).message }, "could not record a sandbox event");
      return false;
    }
  }

  /** Marks a RUNNING sandbox ERROR with the reason and kills its QEMU (the exit handler cleans up). */
  failVm(id: string, vm: QemuVm, reason: string, from: readonly SandboxStatus[] = ["RUNNING"]): void {
    const { store, log } = this.deps;
    const now = new Date().toISOString();
    try {
      if (!store.updateSandbox(id, { status: "ERROR", error_reason: reason, terminated_at: now }, from)) return;
    } catch (err) {
      // Not recorded (disk full?): leave the VM; the watchdog or a later call tries again.
      log.error({ sandbox: id, reason, err: (err as Error).message }, "could not mark the sandbox ERROR");
      return;
    }
    this.eventSafely(id, `error: ${reason}`);
    log.warn({ sandbox: id, reason }, "sandbox VM failed");
    try {
      process.kill(vm.pid, "SIGKILL");
    } catch {}
  }

  private runStartCommand(sb: Sandbox, vm: QemuVm): void {
    const out = createWriteStream(path.join(this.logDir(sb.id), "start-command.log"));
    const exec = vm.agent.exec({ shell: sb.start_command ?? "", env: this.environmentOf(sb) });
    this.deps.store.addEvent(sb.id, "start command launched");
    (async () => {
      for await (const ev of exec.events) {
        if (ev.type === "stdout" || ev.type === "stderr") {
          if (!out.write(ev.data)) await new Promise<void>((r) => out.once("drain", () => r()));
        } else if (ev.type === "exit") {
          this.deps.store.addEvent(sb.id, `start command exited with ${ev.info.exit_code}`);
        }
      }
    })()
      .catch(() => {})
      .finally(() => out.end());
  }

  /** Where sandbox disks and checkpoint layers live side by side. */
  get layersDir(): string {
    return path.join(this.deps.dataDir, "layers");
  }

  /** Removes the sandbox's disk files except layers that checkpoints still own. Idempotent. */
  private cleanupDisk(id: string): void {
    rmSync(this.diskDir(id), { recursive: true, force: true });
    if (!existsSync(this.layersDir)) return;
    const owned = new Set(this.deps.store.listCheckpoints({ sandboxId: id }).map((c) => c.blob_key));
    const prefix = liveDiskName(id, "");
    for (const f of readdirSync(this.layersDir)) {
      if (f.startsWith(prefix) && !owned.has(f)) rmSync(path.join(this.layersDir, f), { force: true });
    }
  }

  get(teamId: string, id: string): Sandbox {
    const sb = this.deps.store.getSandbox(id, teamId);
    if (!sb) throw new SandtreeError("SANDBOX_NOT_FOUND", `sandbox ${id} not found`, { id });
    return sb;
  }

  list(teamId: string, q: { status?: SandboxStatus; labels?: Record<string, string>; limit: number; cursor?: string }) {
    let beforeSeq: number | undefined;
    if (q.cursor !== undefined) {
      beforeSeq = Number.parseInt(Buffer.from(q.cursor, "base64url").toString("utf8"), 10);
      if (!Number.isSafeInteger(beforeSeq)) throw new SandtreeError("VALIDATION_FAILED", "invalid cursor", { field: "cursor" });
    }
    const { sandboxes, lastSeq } = this.deps.store.listSandboxes(teamId, {
      ...(q.status ? { status: q.status } : {}),
      ...(q.labels ? { labels: q.labels } : {}),
      limit: q.limit,
      ...(beforeSeq !== undefined ? { beforeSeq } : {}),
    });
    return {
      sandboxes,
      next_cursor: lastSeq === null ? null : Buffer.from(String(lastSeq)).toString("base64url"),
    };
  }

  /** The running VM of a sandbox, or 404 / 409 SANDBOX_NOT_RUNNING. */
  running(teamId: string, id: string): QemuVm {
    const sb = this.get(teamId, id);
    if (this.adopting.has(id)) {
      // The routes wait for the adoption first (whenAdopted); this is for callers that do not.
      throw new SandtreeError(
        "SANDBOX_NOT_RUNNING",
        `sandbox ${id} is being reconnected after a server restart; retry in a moment`,
        { id, status: sb.status, adopting: true },
      );
    }
    const vm = this.vms.get(id);
    if (sb.status !== "RUNNING" || !vm || vm.exit) {
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} is ${sb.status}, not RUNNING`, { id, status: sb.status });
    }
    const ioError = this.ioErrors.get(id);
    if (ioError) {
      throw new SandtreeError("HOST_DISK_FULL", `sandbox ${id} is held: ${ioError}; it runs on once space is freed`, { id });
    }
    return vm;
  }

  /**
   * A QMP command of an API call, under SANDTREE_QMP_DEADLINE_MS. QEMU serves QMP from its main
   * loop whatever the guest does, so no answer in time means QEMU itself is stopped or hung: the
   * sandbox becomes ERROR and its QEMU is killed, and the caller gets 502 GUEST_ERROR with the
   * reason (never a call that hangs).
   */
  private async qmpCall(id: string, vm: QemuVm, command: string, what: string): Promise<void> {
    const qmp = vm.qmp;
    if (!qmp) throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} has no QMP connection`, { id });
    // The call's own deadline decides (the liveness watchdog stands aside meanwhile).
    const release = this.holdWatchdog(id);
    try {
      await qmp.execute(command, undefined, { timeoutMs: this.qmpDeadlineMs });
    } catch (err) {
      if (err instanceof QmpTimeoutError) {
        const reason = `QEMU did not answer ${what} (QMP ${command}) within ${this.qmpDeadlineMs} ms; the VM was killed`;
        this.failVm(id, vm, reason, ["RUNNING", "PAUSED"]);
        throw new SandtreeError("GUEST_ERROR", `sandbox ${id}: ${reason}`, { id });
      }
      if (vm.exit || qmp.isClosed) {
        const why = this.deps.store.getSandbox(id)?.error_reason ?? vm.exit?.reason ?? "its VM stopped";
        throw new SandtreeError("GUEST_ERROR", `sandbox ${id}: ${what} failed: ${why}`, { id });
      }
      throw err;
    } finally {
      release();
    }
  }

  /** Stops the VM's CPUs (QMP stop): memory and disk stay, no CPU is used, quotas do not count it. */
  async pause(teamId: string, id: string): Promise<Sandbox> {
    const vm = this.running(teamId, id);
    this.bumpWatch(id);
    await this.qmpCall(id, vm, "stop", "a pause");
    if (!this.deps.store.updateSandbox(id, { status: "PAUSED" }, ["RUNNING"])) {
      await vm.qmp?.execute("cont", undefined, { timeoutMs: this.qmpDeadlineMs }).catch(() => {});
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} changed state while pausing`, { id });
    }
    this.deps.store.addEvent(id, "paused");
    return this.get(teamId, id);
  }

  /** Continues a PAUSED sandbox with every process as it was; the guest clock is set right. */
  async resume(teamId: string, id: string): Promise<Sandbox> {
    const sb = this.get(teamId, id);
    const vm = this.vms.get(id);
    if (sb.status !== "PAUSED" || !vm || vm.exit || this.adopting.has(id)) {
      throw new SandtreeError("CONFLICT", `sandbox ${id} is ${sb.status}, not PAUSED`, { id, status: sb.status });
    }
    this.bumpWatch(id);
    await this.qmpCall(id, vm, "cont", "a resume");
    vm.agent.syncClock();
    this.deps.store.updateSandbox(id, { status: "RUNNING" }, ["PAUSED"]);
    this.deps.store.addEvent(id, "resumed");
    return this.get(teamId, id);
  }

  async delete(teamId: string, id: string): Promise<Sandbox> {
    // A VM still being adopted is waited for (its deadline bounds it). A paused guest cannot shut
    // down cleanly: let it run for its shutdown (a QEMU that does not answer is killed by the stop).
    await this.adopting.get(id)?.done;
    if (this.deps.store.getSandbox(id, teamId)?.status === "PAUSED")
      await this.vms
        .get(id)
        ?.qmp?.execute("cont", undefined, { timeoutMs: this.qmpDeadlineMs })
        .catch(() => {});
    const sb = this.get(teamId, id);
    if (!TERMINAL_STATUSES.includes(sb.status)) {
      this.deps.store.updateSandbox(id, { status: "TERMINATED", terminated_at: new Date().toISOString() }, ACTIVE);
      this.deps.store.addEvent(id, "deleted");
    }
    await this.teardown(id);
    return this.get(teamId, id);
  }

  private readonly teardownHooks: Array<(id: string) => void> = [];

  /** Called (synchronously, errors ignored) whenever a sandbox is torn down: other services forget it. */
  onTeardown(hook: (id: string) => void): void {
    this.teardownHooks.push(hook);
  }

  /** Stops whatever runs for a sandbox and removes its disk and sockets. Idempotent. */
  private async teardown(id: string): Promise<void> {
    for (const hook of this.teardownHooks) {
      try {
        hook(id);
      } catch {}
    }
    await this.checkpointHooks?.onTeardown(id).catch(() => {});
    // An adoption in flight settles within its deadline (close() cancels it first).
    await this.adopting.get(id)?.done;
    const p = this.provisioning.get(id);
    if (p) {
      p.abort.abort(new Error("sandbox deleted"));
      await p.done;
    }
    const vm = this.vms.get(id);
    if (vm) {
      this.vms.delete(id);
      await vm.stop();
    }
    this.cleanupDisk(id);
    rmSync(this.runDir(id), { recursive: true, force: true });
    rmSync(this.outputDir(id), { recursive: true, force: true });
    await this.deps.network?.detach(id);
  }

  /** Spilled output of buffered execs (deleted with the sandbox). */
  outputDir(id: string): string {
    return path.join(this.sandboxDir(id), "outputs");
  }

  /** Moves an active sandbox to TIMEOUT and tears it down; false when it had already ended. */
  async expire(id: string, reason: string): Promise<boolean> {
    const changed = this.deps.store.updateSandbox(
      id,
      { status: "TIMEOUT", error_reason: reason, terminated_at: new Date().toISOString() },
      ACTIVE,
    );
    if (changed) this.deps.store.addEvent(id, `timeout: ${reason}`);
    await this.teardown(id);
    return changed;
  }

  logs(teamId: string, id: string, tailBytes: number) {
    this.get(teamId, id);
    const file = path.join(this.logDir(id), "console.log");
    const text = tailOfFile(file, tailBytes);
    let size = 0;
    try {
      size = readFileSync(file).length;
    } catch {}
    return {
      sandbox_id: id,
      console: text,
      console_truncated: size > tailBytes,
      events: this.deps.store.listEvents(id, 500),
    };
  }

  /** Resolves when the sandbox's adoption after a restart has settled (undefined: none in flight). */
  whenAdopted(id: string): Promise<void> | undefined {
    return this.adopting.get(id)?.done;
  }

  /**
   * After a restart. Its decisions are taken synchronously, before the server listens: which
   * sandboxes have a surviving QEMU to adopt (QEMU runs in its own process group), which are
   * lost (caught `PENDING`/`PROVISIONING`, or their QEMU is gone: `ERROR` with the reason), which
   * QEMUs nobody will adopt (killed at once). The adoptions then run in parallel in the
   * background while the API answers, each under one deadline for all its steps
   * (SANDTREE_ADOPT_DEADLINE_MS, 10 s): one that misses it or fails gets its QEMU killed and
   * its sandbox `ERROR` with the reason, so a frozen VM holds up nothing else. Until a sandbox's
   * adoption settles it shows its last status and calls into it wait (whenAdopted). Finally the
   * disks and socket directories of the sandboxes found without a VM are removed. The returned
   * promise settles when every adoption has.
   */
  reconcile(): Promise<void> {
    const { store, log } = this.deps;
    const found = new Map(findQemuProcesses(this.deps.runRoot).map((p) => [p.name, p.pid]));
    const cleanup = (id: string) => {
      this.cleanupDisk(id);
      rmSync(this.runDir(id), { recursive: true, force: true });
    };
    const lose = (sb: Sandbox, reason: string): Promise<unknown> => {
      // Its leftovers go first, so a sandbox seen ERROR has nothing left behind.
      cleanup(sb.id);
      if (
        store.updateSandbox(sb.id, { status: "ERROR", error_reason: reason, terminated_at: new Date().toISOString() }, ACTIVE)
      ) {
        store.addEvent(sb.id, `error: ${reason}`);
        log.warn({ sandbox: sb.id, reason }, "sandbox lost in a restart");
      }
      return this.deps.network?.detach(sb.id).catch(() => {}) ?? Promise.resolve();
    };
    const active = store.listSandboxesByStatus(ACTIVE).filter((sb) => !this.vms.has(sb.id) && !this.provisioning.has(sb.id));
    const settled: Array<Promise<unknown>> = [];
    for (const sb of active) {
      const pid = found.get(`sandtree-${sb.id}`);
      if (sb.status !== "RUNNING" && sb.status !== "PAUSED")
        settled.push(lose(sb, `the server restarted while provisioning the sandbox (${sb.status})`));
      else if (pid === undefined) settled.push(lose(sb, "the server restarted and the sandbox's VM was gone"));
      else {
        const abort = new AbortController();
        const done = this.adoptOne(sb, pid, abort.signal)
          .then(async (reason) => {
            if (reason !== null) await lose(sb, reason);
          })
          .catch((err: Error) => log.error({ sandbox: sb.id, err: err.message }, "adoption failed"))
          .finally(() => this.adopting.delete(sb.id));
        this.adopting.set(sb.id, { abort, done });
        settled.push(done);
      }
    }
    // QEMUs nobody adopts (of ERROR sandboxes, of deletes or provisionings a crash interrupted): killed now.
    const orphans = [...found].filter(([name]) => {
      const id = name.replace(/^sandtree-/, "");
      return !this.adopting.has(id) && !this.vms.has(id);
    });
    for (const [name, pid] of orphans) {
      try {
        if (qemuAlive(pid, name)) process.kill(pid, "SIGKILL");
      } catch {}
    }
    // What the previous server left on disk for sandboxes without a VM (a crash between creating
    // the overlay and starting QEMU leaves only a layer file); an adoption that fails cleans its own.
    const ids = new Set<string>();
    for (const root of [path.join(this.deps.dataDir, "sandboxes"), this.deps.runRoot]) {
      if (existsSync(root)) for (const id of readdirSync(root)) ids.add(id);
    }
    if (existsSync(this.layersDir)) {
      for (const f of readdirSync(this.layersDir)) {
        const m = /^live-(sb-[a-z2-7]+)-/.exec(f);
        if (m?.[1]) ids.add(m[1]);
      }
    }
    for (const id of ids) {
      if (this.vms.has(id) || this.provisioning.has(id) || this.adopting.has(id) || this.resetting.has(id)) continue;
      cleanup(id);
    }
    return Promise.all(settled).then(() => undefined);
  }

  /** Adopts one surviving VM; null when it is supervised now, else why it was not (its QEMU is killed). */
  private async adoptOne(sb: Sandbox, pid: number, signal: AbortSignal): Promise<string | null> {
    const { store, log } = this.deps;
    try {
      const guestNet = this.deps.network?.guestNetOf(sb.id);
      const vm = await QemuVm.adopt({
        name: `sandtree-${sb.id}`,
        pid,
        runDir: this.runDir(sb.id),
        logDir: this.logDir(sb.id),
        connectTimeoutMs: this.adoptDeadlineMs,
        signal,
        ...(guestNet ? { guestNet } : {}),
        // A PAUSED sandbox stays paused (its guest runs only for the handshake); a RUNNING one
        // whose VM was found stopped (a crash mid-pause or mid-checkpoint) runs on.
        keepPaused: sb.status === "PAUSED",
      });
      // Deleted, expired or shut down meanwhile: the adoption's result is not wanted.
      const now = store.getSandbox(sb.id)?.status;
      if (this.closing || (now !== "RUNNING" && now !== "PAUSED")) {
        await vm.stop({ graceMs: 0 }).catch(() => {});
        return `the sandbox ended (${now ?? "gone"}) while its VM was being reconnected`;
      }
      this.supervise(sb.id, vm);
      const state = vm.adoptedRunState === "running" ? "" : `; its VM was ${vm.adoptedRunState}`;
      store.addEvent(sb.id, `adopted after a server restart (pid ${pid}${state})`);
      log.info({ sandbox: sb.id, pid, runState: vm.adoptedRunState, status: sb.status }, "sandbox VM adopted");
      return null;
    } catch (err) {
      return `the server restarted and the sandbox's VM did not answer: ${(err as Error).message}`;
    }
  }

  /** Ordered, idempotent shutdown: stop taking work, stop every VM, mark them TERMINATED. */
  async close(): Promise<void> {
    this.closing = true;
    await this.templates?.close();
    const ids = new Set([...this.vms.keys(), ...this.provisioning.keys(), ...this.adopting.keys()]);
    // Adoptions still running are cancelled (their QEMU is killed); the loop below marks them TERMINATED.
    for (const a of this.adopting.values()) a.abort.abort(new Error("the server is shutting down"));
    await Promise.allSettled(
      [...ids].map(async (id) => {
        this.deps.store.updateSandbox(
          id,
          { status: "TERMINATED", error_reason: "the server shut down", terminated_at: new Date().toISOString() },
          ACTIVE,
        );
        await this.teardown(id);
      }),
    );
  }

  /** The sandbox's guest IPv4 (the port proxy connects to it); null without a network. */
  guestAddressOf(id: string): string | null {
    return this.deps.network?.addressOf(id) ?? null;
  }
}
