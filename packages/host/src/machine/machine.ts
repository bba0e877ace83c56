import type { Duplex } from "node:stream";
import type { AgentExec, AgentExecEvent, ExecSpec, StatInfo } from "../agent/agent-client.js";
import type { RegistryCredentials } from "../images/registry-auth.js";
import type { MachineRates } from "../limits/machine-limits.js";
import type { HostNetworks } from "../network/host-networks.js";
import type { MemoryImages } from "../snapshots/memory-images.js";
import type { TemplateBuildErrorHandler, TemplateStore, TemplateTaps } from "../snapshots/template-store.js";
import type { GuestBoot } from "../vmm/qemu-args.js";
import type { VolumeMount } from "../volumes/guest-mount.js";
import type { HostVolumes } from "../volumes/host-volumes.js";
import type { ConsoleTail } from "./console-tail.js";
import type { HostDisks } from "./host-disks.js";

/**
 * The seam between the control plane and the machines that run sandboxes. The server holds
 * `Machine`s and a `MachineHost` and nothing else of a VM: today the QEMU microVM implements
 * them in-process; a remote worker serves the same interface over the network (src/remote/:
 * RemoteHost, serveMachineHost), and another isolation class (a container runtime) can implement
 * it too. Every call that may cross the network is async.
 */

/** A command running in a machine: its events, stdin, signals and PTY size. */
export type MachineExec = AgentExec;
export type MachineExecEvent = AgentExecEvent;
export { DISK_FILE_SUFFIX, type HostDisks, isBaseName } from "./host-disks.js";
export type { HostLayers, LayerDigest } from "./host-layers.js";
export type { ExecSpec, StatInfo };

/** How a machine ended. `expected`: stopped on purpose (stop(), kill()); otherwise it died. */
export interface MachineExit {
  code: number | null;
  signal: string | null;
  expected: boolean;
  reason: string;
  /**
   * The guest itself rebooted, panicked (a triple fault too) or powered off: a machine does not
   * reboot, so its VMM ended on its own, with success. False for a kill or a crash of the VMM.
   */
  guestReset: boolean;
}

/** The machine itself (not its guest) did not answer a control command in time: it is hung. */
export class MachineTimeoutError extends Error {
  override readonly name = "MachineTimeoutError";
}

/** The machine answered a control command with an error (it is alive and said no). */
export class MachineRefusedError extends Error {
  override readonly name = "MachineRefusedError";
}

/**
 * A connection to a port of the guest failed. `refused`: nothing listens there (the guest said
 * so); otherwise it could not be reached (`reason`: why, such as ETIMEDOUT or EHOSTUNREACH).
 */
export class MachinePortError extends Error {
  override readonly name = "MachinePortError";
  constructor(
    message: string,
    readonly port: number,
    readonly refused: boolean,
    readonly reason: string,
    opts?: { cause?: unknown },
  ) {
    super(message, opts);
  }
}

/**
 * One checkpoint of a running machine, taken by `Machine.checkpoint`: the guest's filesystem is
 * frozen (or, with memory, its CPUs stopped) only while its disk is cut; rolled back on failure.
 */
export interface CheckpointRequest {
  /**
   * The disk the guest writes to from now on, made on top of the one it wrote to until now: a name
   * in the host's layers directory (like every disk, layer and memory state named across this
   * interface: checkLayerName, VALIDATION_FAILED for a path).
   */
  nextDisk: string;
  /** Its size (the guest-visible disk size). */
  diskSizeBytes: number;
  /** Also saves RAM and device state to the file of this name (the CPUs stop for the save). */
  memoryFile?: string;
  /** How long the guest may take to freeze its filesystem. */
  freezeDeadlineMs: number;
}

/** What a checkpoint saved. */
export interface SavedCheckpoint {
  /** The disk layer now read-only, by name: what changed since the previous checkpoint (its backing). */
  layer: string;
  /** The memory state file's name, or null for a files-only checkpoint. */
  memoryState: string | null;
  /** What a memory state needs of the machine it loads into (`tcg`, `kvm+nested`...), when known. */
  machine: string | null;
}

/**
 * A checkpoint failed, and was rolled back. `machineLost` (why): the machine can no longer be
 * trusted (its control channel hung, or whether the guest writes to the new disk is unknown) and
 * must be stopped by the caller; null: it runs on as before the checkpoint.
 */
export class CheckpointFailedError extends Error {
  override readonly name = "CheckpointFailedError";
  constructor(
    message: string,
    readonly machineLost: string | null,
    opts?: { cause?: unknown },
  ) {
    super(message, opts);
  }
}

/** What a host can do (a property of the host, not asked per machine). */
export interface HostCapabilities {
  /** Checkpoints with memory, and starts that resume one. */
  memorySnapshots: boolean;
  /** Hardware virtualization inside the guest; `why` says why not. */
  nested: { ok: true } | { ok: false; why: string };
  /** How machines run here (`kvm`, `tcg`, ...): a memory state restores only into the same. */
  accel: string;
  /**
   * Whether machines may mount volumes (MachineSpec.mounts), served by the host's own file server
   * over its sandbox networks; `why` says why not (a spec with mounts is then NOT_SUPPORTED).
   */
  volumes: { ok: true } | { ok: false; why: string };
}

/** What a new machine boots or resumes from. */
export interface MachineSpec extends GuestBoot {
  /**
   * Unique per host; a restarted host finds its machines again by it. The host keeps the
   * machine's files (sockets, logs) in its own directories under this name (checkMachineName:
   * at most 64 letters, digits, `.`, `_`, `-`; VALIDATION_FAILED otherwise).
   */
  name: string;
  /** The machine's writable root disk (createDisk's), by name in the host's layers directory. */
  rootDisk: string;
  /** A NIC on this tap device, and eth0's configuration ("ADDR/PREFIX GATEWAY"). */
  nic?: { tap: string; guestNet: string };
  /**
   * Resume a booted warm template copy-on-write instead of booting. With `rootWait` the template
   * waits for its root disk, and the clone mounts `rootDisk` (any image's or checkpoint's, at its
   * own size); without, the template's root is mounted already and `rootDisk` sits on its disk.
   * Its files are the host's own (its warm caches' Template or MemoryImage, never a remote host's).
   */
  template?: { ramFile: string; stateFile: string; rootWait?: boolean };
  /** Resume a memory checkpoint (RAM and devices) instead of booting: its state's name in the layers directory. */
  memoryState?: string;
  /**
   * Volumes the guest sees at `guestPath`, each named in the host's volumes directory (never a
   * path: checkVolumeName, VALIDATION_FAILED before anything starts), shared read-write with every
   * other machine that mounts them (NFSv3 over the machine's network: `nic` is required, else
   * NETWORK_DISABLED).
   * A resumed machine (template, memory state) mounts what its state does not hold already.
   */
  mounts?: VolumeMount[];
  /**
   * Hardware virtualization inside the guest (its own `/dev/kvm`). A template or memory state
   * restores only into a machine with the same value (the guest CPU differs).
   */
  nested?: boolean;
  /**
   * Its disk and network rates. On a host with limits on (QemuMachineHostOptions.limiter) the
   * machine also runs in its own cgroup: CPU to its vCPUs, memory to its size plus QEMU's overhead.
   */
  rates?: MachineRates;
  signal?: AbortSignal;
}

/** A spec's boot fields and its root disk, as they are: what every form of a start carries. */
export function bootAndFiles(spec: MachineSpec): GuestBoot & Pick<MachineSpec, "rootDisk"> {
  return {
    name: spec.name,
    accel: spec.accel,
    cpuCores: spec.cpuCores,
    memoryMb: spec.memoryMb,
    kernel: spec.kernel,
    initramfs: spec.initramfs,
    rootDisk: spec.rootDisk,
  };
}

/** A machine that outlived the host process which started it. */
export interface AdoptSpec {
  name: string;
  pid: number;
  /** One deadline for every step of the reconnection; a machine that misses it is killed. */
  deadlineMs: number;
  guestNet?: string;
  /** Stop its CPUs again once it has answered (the sandbox was paused). */
  keepPaused: boolean;
  /** The mounts it was started with (MachineSpec.mounts): exported to it again. */
  mounts?: VolumeMount[];
  signal?: AbortSignal;
}

/** Supervision of a running machine: the liveness watchdog and the disk-error watcher. */
export interface SuperviseOptions {
  /** An unanswered ping this long makes the machine "unresponsive" (0: no watchdog). */
  agentDeadlineMs: number;
  /** Extra reasons the guest may be quiet on purpose (for example: its sandbox is not RUNNING). */
  quiet?: () => boolean;
}

/**
 * Events: `exit` (MachineExit), `unresponsive` (reason: the watchdog's ping went unanswered;
 * the machine is left running for the caller to decide), `protocol-violation` (reason: the guest
broke the agent protocol, so root in it replaced its agent; the connection is closed, the machine
left running for the caller to stop), `disk-error` (reason: the VMM paused
 * the machine on a host disk error; it retries and runs on by itself once space is back),
 * `disk-error-cleared`.
 */
export interface Machine {
  readonly name: string;
  readonly pid: number;
  /** Set once the machine has ended. */
  readonly exit: MachineExit | null;
  /** False once the machine ended or its control channel closed. */
  readonly controllable: boolean;
  /** For an adopted machine: its run state when found (`running`, `paused`, ...). */
  readonly adoptedRunState: string | undefined;
  /** The disk the guest writes to now, by name in its host's layers directory (changes with every checkpoint). */
  readonly activeDisk: string | undefined;
  /** Why the VMM holds the machine on a host disk error, or undefined. */
  readonly diskError: string | undefined;
  /** Where its start's time went (ms after the start at `launched`, `qmp`, `loaded`, `agent`; `hellos`), where known. */
  readonly startMarks?: Readonly<Record<string, number>> | undefined;

  exec(spec: ExecSpec): MachineExec;
  readFile(path: string, opts?: { offset?: number; length?: number; signal?: AbortSignal }): AsyncIterable<Buffer>;
  writeFile(
    path: string,
    source: AsyncIterable<Uint8Array>,
    opts?: { mode?: number; append?: boolean; signal?: AbortSignal },
  ): Promise<{ bytes: number }>;
  stat(path: string): Promise<StatInfo>;
  list(path: string): Promise<StatInfo[]>;
  mkdir(path: string, opts?: { parents?: boolean; mode?: number }): Promise<void>;
  remove(path: string, opts?: { recursive?: boolean }): Promise<void>;
  /** Sets the guest clock from the host's (after a pause or a restore). */
  syncClock(): void;
  /**
   * A byte stream to TCP `port` of the guest, once connected; ending its writable side half-closes
   * the connection. MachinePortError when the guest refuses or cannot be reached, NETWORK_DISABLED
   * (SandtreeError) when the machine has no network.
   */
  connect(port: number, opts?: { signal?: AbortSignal }): Promise<Duplex>;

  /**
   * Stops the CPUs; memory and disk stay. MachineTimeoutError when the VMM does not answer within
   * `timeoutMs` (default: the host's control deadline).
   */
  pause(opts?: { timeoutMs?: number }): Promise<void>;
  /** Continues the CPUs (after pause). */
  resume(opts?: { timeoutMs?: number }): Promise<void>;
  /** The VMM's run state (`running`, `paused`, `io-error`...), undefined when it does not answer. */
  runState(opts: { timeoutMs: number }): Promise<string | undefined>;
  /**
   * The checkpoint sequence as one call: freeze (files only) or stop the CPUs (with memory), cut
   * the disk, save memory, thaw or resume, reset the guest clock. Throws CheckpointFailedError
   * with the machine rolled back (or `machineLost`).
   */
  checkpoint(req: CheckpointRequest): Promise<SavedCheckpoint>;

  /** Tells the watchdog the guest is held still on purpose until the returned function is called. */
  hold(): () => void;
  /** Starts the liveness watchdog and the disk-error watcher (once). */
  supervise(opts: SuperviseOptions): void;

  /** Stops the machine (guest shutdown, then the VMM, then SIGKILL). Idempotent. */
  stop(opts?: { graceMs?: number }): Promise<MachineExit>;
  /** SIGKILLs the machine now; its exit is NOT expected (supervision treats it as a death). */
  forceKill(): void;

  on(event: "exit", fn: (exit: MachineExit) => void): this;
  on(event: "unresponsive" | "protocol-violation" | "disk-error", fn: (reason: string) => void): this;
  on(event: "disk-error-cleared", fn: () => void): this;
  once(event: "exit", fn: (exit: MachineExit) => void): this;
}

/** Where a host keeps what makes starts warm (their VMs' sockets: in the host's own run root). */
export interface WarmCacheOptions {
  dataDir: string;
  /** Lends template builds a tap (null: networks off). */
  taps: TemplateTaps | null;
  /** Told why a memory image build failed (starts from that checkpoint load its whole state). */
  onMemoryImageError?: (err: Error, memState: string) => void;
  /** Told why a template build failed (its half-built files are gone; it is tried again, then the next start may build it). */
  onTemplateError?: TemplateBuildErrorHandler;
}

/** The booted templates (one per shape, and per image) and the copy-on-write images of memory states. */
export interface WarmCaches {
  templates: TemplateStore;
  memoryImages: MemoryImages;
}

/** An image as a host holds it: the base a sandbox's disk lies on (`linkBase`). */
export interface ResolvedImage {
  ref: string;
  /** The image manifest's digest (`sha256:...`). */
  digest: string;
  /**
   * The base's name (never a path): the same on every host for the same image (its manifest
   * digest), so a checkpoint's record of it holds on any host; `linkBase` finds it on a host
   * (IMAGE_NOT_FOUND where that host does not hold it, or no longer).
   */
  base: string;
  virtualSizeBytes: number;
  source: "local" | "registry";
  /** The image config's labels (the server reads sandtree's: image-defaults.ts). */
  labels: Record<string, string>;
}

/** An image a host holds (`HostImages.list`). */
export interface ImageSummary {
  ref: string;
  digest: string;
  source: "local" | "registry";
  virtualSizeBytes: number;
  createdAt?: string | null;
}

/** How a host is asked for an image: registry credentials (per call, never stored or logged). */
export interface ImageRequest {
  credentials?: RegistryCredentials;
  signal?: AbortSignal;
}

/**
 * Images, owned by the host: each is built into a base on the host that runs machines on it
 * (a worker builds its own). Unknown images fail with IMAGE_NOT_FOUND.
 */
export interface HostImages {
  /** The image's base on this host, pulled and built first when it is not here yet. */
  resolve(ref: string, opts: ImageRequest): Promise<ResolvedImage>;
  /** Throws IMAGE_NOT_FOUND quickly when the image is neither here nor in its registry (no pull). */
  check(ref: string, opts: ImageRequest): Promise<void>;
  list(): Promise<ImageSummary[]>;
  /**
   * Builds the image `layoutRef` (a ref name or digest; optional when the layout holds one) of the
   * OCI layout directory `dir` (on the caller's machine) under `name`.
   */
  importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage>;
}

/** One host's machines: start, restore, and find again after a restart. */
export interface MachineHost extends HostDisks {
  readonly capabilities: HostCapabilities;
  /** The images machines boot from, built on this host. */
  readonly images: HostImages;
  /** Its sandbox networks: taps, firewall rules, DNS and tunnels for the control plane's records. */
  readonly networks: HostNetworks;
  readonly volumes: HostVolumes; // its volumes' storage and files, by name (what MachineSpec.mounts name)
  /** The caches that make starts warm; null: this host has none (every start is a cold one). */
  warmCaches(opts: WarmCacheOptions): WarmCaches | null;
  /** Boots (or resumes from a template or memory state) and resolves once the guest answered. */
  start(spec: MachineSpec): Promise<Machine>;
  /** Reconnects to a machine a previous host process started. */
  adopt(spec: AdoptSpec): Promise<Machine>;
  /** Machines of this host still running (their names and pids), for adoption. */
  survivors(): Promise<Array<{ name: string; pid: number }>>;
  /** Kills a surviving machine nobody will adopt (checked by name: pids are reused). */
  killSurvivor(pid: number, name: string): void;
  /**
   * The last `bytes` (at most CONSOLE_TAIL_MAX_BYTES) of the console log the machine `name`
   * wrote, and the log's whole size; the log outlives its machine, so this asks the host, not a
   * Machine. No log: empty text, size 0.
   */
  consoleTail(name: string, bytes: number, opts?: { signal?: AbortSignal }): Promise<ConsoleTail>;
  /**
   * Removes what the machine `name` left in the host's run directory for it (sockets, pid file)
   * once it ended (a stop removes them; a death or a kill may not). Its log stays. Idempotent.
   */
  discard(name: string, opts?: { signal?: AbortSignal }): Promise<void>;
}
