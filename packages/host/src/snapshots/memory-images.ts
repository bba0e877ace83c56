import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createBlankDiskCopy } from "../disks/overlay-copies.js";
import { modulesDiskFor } from "../paths.js";
import { freePageReporting } from "../vmm/free-page-reporting.js";
import { defaultJailConfig, type JailConfig } from "../vmm/jail.js";
import { type Accel, cpuKey, DEVICE_MODEL } from "../vmm/qemu-args.js";
import { INCOMING_FD, launchQemu } from "../vmm/qemu-launch.js";
import { QmpClient } from "../vmm/qmp-client.js";
import { loadVmState, saveVmState } from "./migration.js";
import { fitsInRam } from "./ram-placement.js";
import type { TemplateTaps } from "./template-store.js";

/** The machine a memory state was saved from: its image must be loaded into the same one. */
export interface MemoryShape {
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  kernel: string;
  initramfs: string;
  /** Whether the saved VM had a NIC. */
  nic: boolean;
  /** Whether its CPU offered hardware virtualization (see cpuModel). */
  nested?: boolean;
}

/** A memory state as a RAM file children map copy-on-write, plus its device state. */
export interface MemoryImage {
  ramFile: string;
  stateFile: string;
}

export interface MemoryImagesOptions {
  /** Where the builder of a state saved with a NIC gets its tap (see build). */
  taps?: TemplateTaps | null;
  /** A tmpfs directory for RAM files while host memory allows (ram-placement.ts); else beside the image. */
  ramDir?: string | null;
  /** Told why a build failed (the start then loads the whole stream: slower, still correct). */
  onBuildError?: (err: Error, memState: string) => void;
  /** The jail the builder's QEMU runs in (its host's; default: the default jail). */
  jail?: JailConfig;
  /**
   * The file of the memory state named `name` (its host's: in its layers directory, the name
   * checked there); default: `name` is the file.
   */
  stateFile?: (name: string) => string;
}

/**
 * Memory checkpoints as RAM files (#22 item 2). A memory checkpoint is saved as one migration
 * stream (RAM and devices; durable, what the blob store keeps). Loading that stream costs a full
 * copy of the guest's RAM per child. Instead, the first child (or reset, or restore) of a
 * checkpoint loads the stream once into a paused QEMU whose RAM is a shared file, and saves its
 * device state alone (x-ignore-shared); the guest never runs there. Every start from that
 * checkpoint is then a clone like a warm template's: the RAM file mapped privately, so N
 * children cost N clones (pages stay shared until a child writes them), not N full loads.
 * The server starts the build when the checkpoint is taken (`prepare`), so a fork's children find
 * it built or under way. Its RAM file goes to tmpfs when host memory allows (no disk writes, no
 * sparse-file block allocation), else beside the image in the data dir.
 * Limits: a child has the checkpoint's CPU count and memory size (the API enforces it), on a
 * host with the same QEMU device model; the image is a local cache, rebuilt from the stream.
 */
export class MemoryImages {
  private readonly building = new Map<string, Promise<MemoryImage | null>>();
  /** Builders' cleanups still running (their QEMU's exit, lease, tap): close() waits for them. */
  private readonly cleanups = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private readonly taps: TemplateTaps | null;
  private readonly ramDir: string | null;
  private readonly onBuildError: (err: Error, memState: string) => void;
  private readonly jail: JailConfig;
  private readonly stateFile: (name: string) => string;

  constructor(
    readonly root: string,
    readonly runRoot: string,
    opts: MemoryImagesOptions = {},
  ) {
    this.taps = opts.taps ?? null;
    this.ramDir = opts.ramDir ?? null;
    this.onBuildError = opts.onBuildError ?? (() => {});
    this.jail = opts.jail ?? defaultJailConfig();
    this.stateFile = opts.stateFile ?? ((name) => name);
    mkdirSync(root, { recursive: true });
  }

  /**
   * Stops builds in flight (their QEMU killed, their tap given back), refuses new ones, and gives
   * the RAM files on tmpfs back to the host (call once no VM maps them): they live as long as the
   * server; the next start rebuilds an image from its stream when it needs it.
   */
  async close(): Promise<void> {
    this.abort.abort(new Error("shutting down"));
    await Promise.allSettled([...this.building.values()]);
    await Promise.allSettled([...this.cleanups]);
    if (this.ramDir) rmSync(this.ramDir, { recursive: true, force: true });
  }

  /** Starts building the image in the background (a memory checkpoint was just saved; `memState`: its name, see stateFile). */
  prepare(memState: string, shape: MemoryShape): void {
    void this.ensure(memState, shape);
  }

  private key(memState: string, shape: MemoryShape): string {
    const st = statSync(memState);
    const stamp = JSON.stringify({
      memState,
      size: st.size,
      mtime: st.mtimeMs,
      ...shape,
      cpu: cpuKey(shape.accel, shape.nested === true),
      devices: DEVICE_MODEL,
      // virtio-balloon is in the saved state only where this host runs it.
      freePageReporting: freePageReporting(),
    });
    return createHash("sha256").update(stamp).digest("hex").slice(0, 24);
  }

  /**
   * The image of the memory state named `memState`, built once (concurrent callers share it); null
   * when that failed, the name is not one (stateFile), or the store is closed. `signal` gives up
   * waiting, not the build others may share.
   */
  ensure(memState: string, shape: MemoryShape, signal?: AbortSignal): Promise<MemoryImage | null> {
    if (this.abort.signal.aborted) return Promise.resolve(null);
    let key: string;
    let file: string;
    try {
      file = this.stateFile(memState);
      key = this.key(file, shape);
    } catch {
      return Promise.resolve(null);
    }
    const dir = path.join(this.root, key);
    const ready = this.read(dir);
    if (ready) return Promise.resolve(ready);
    let p = this.building.get(key);
    if (!p) {
      this.prune(); // images of checkpoints deleted since
      p = this.build(key, dir, file, shape)
        .catch((err: Error) => {
          if (!this.abort.signal.aborted) this.onBuildError(err, memState);
          this.remove(key);
          return null;
        })
        .finally(() => this.building.delete(key));
      this.building.set(key, p);
    }
    if (!signal) return p;
    return new Promise<MemoryImage | null>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      void p.then(resolve).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  /** A built image whose files are all there (a RAM file on tmpfs is gone after a reboot). */
  private read(dir: string): MemoryImage | null {
    try {
      const m = JSON.parse(readFileSync(path.join(dir, "image.json"), "utf8")) as MemoryImage;
      return existsSync(m.ramFile) && existsSync(m.stateFile) ? { ramFile: m.ramFile, stateFile: m.stateFile } : null;
    } catch {
      return null;
    }
  }

  private remove(key: string): void {
    rmSync(path.join(this.root, key), { recursive: true, force: true });
    if (this.ramDir) rmSync(path.join(this.ramDir, `${key}.ram`), { force: true });
  }

  /**
   * Removes images whose memory state is gone (its checkpoint deleted) or that a crash cut short,
   * and RAM files on tmpfs that no image names.
   */
  prune(): string[] {
    const removed: string[] = [];
    for (const key of readdirSync(this.root)) {
      if (this.building.has(key)) continue;
      let live = false;
      try {
        const m = JSON.parse(readFileSync(path.join(this.root, key, "image.json"), "utf8")) as { source: string };
        live = existsSync(m.source);
      } catch {}
      if (live) continue;
      this.remove(key);
      removed.push(key);
    }
    if (this.ramDir && existsSync(this.ramDir)) {
      for (const f of readdirSync(this.ramDir)) {
        if (f.endsWith(".ram") && !existsSync(path.join(this.root, f.slice(0, -4))))
          rmSync(path.join(this.ramDir, f), { force: true });
      }
    }
    return removed;
  }

  private async build(key: string, dir: string, memState: string, shape: MemoryShape): Promise<MemoryImage> {
    const signal = this.abort.signal;
    this.remove(key);
    mkdirSync(dir, { recursive: true });
    const runDir = path.join(this.runRoot, `mi-${key.slice(0, 12)}`);
    mkdirSync(runDir, { recursive: true, mode: 0o700 });
    let ramFile = path.join(dir, "ram");
    if (this.ramDir) {
      mkdirSync(this.ramDir, { recursive: true, mode: 0o700 });
      if (fitsInRam(this.ramDir, shape.memoryMb * 1024 * 1024)) ramFile = path.join(this.ramDir, `${key}.ram`);
    }
    const image: MemoryImage = { ramFile, stateFile: path.join(dir, "state") };
    // The guest never runs here: its disk only has to exist (the devices must match the saved ones).
    const disk = path.join(dir, "placeholder.qcow2");
    await createBlankDiskCopy(disk, 64 * 1024 * 1024);
    const modulesDisk = modulesDiskFor(shape.initramfs);
    const qmpSocket = path.join(runDir, "qmp.sock");
    // A state saved from a VM on a tap carries virtio-net's vnet_hdr, which loads only into a NIC
    // whose backend has one too (a hub port has none: QEMU refuses the stream): so a tap without
    // rules, as a template build gets. The guest never runs here, so nothing crosses it.
    if (shape.nic && !this.taps) throw new Error("a memory image with a NIC needs taps");
    signal.throwIfAborted();
    const tap = shape.nic && this.taps ? await this.taps.acquire() : null;
    let launched: Awaited<ReturnType<typeof launchQemu>>;
    try {
      launched = await launchQemu({
        spec: {
          name: `sandtree-memimage-${key.slice(0, 12)}`,
          accel: shape.accel,
          cpuCores: shape.cpuCores,
          memoryMb: shape.memoryMb,
          kernel: shape.kernel,
          initramfs: shape.initramfs,
          rootDisk: disk,
          ...(modulesDisk ? { modulesDisk } : {}),
          agentSocket: path.join(runDir, "agent.sock"),
          qmpSocket,
          consoleLog: path.join(dir, "console.log"),
          pidFile: path.join(runDir, "qemu.pid"),
          memoryFile: { path: image.ramFile, share: true },
          incoming: true,
          ...(tap ? { tap } : {}),
          ...(shape.nested ? { nested: true } : {}),
        },
        runDir,
        logFile: path.join(dir, "qemu.log"),
        incomingFile: memState,
        jail: this.jail,
      });
    } catch (err) {
      if (tap) await this.taps?.release(tap);
      throw err;
    }
    const { child, lease } = launched;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    let qmp: QmpClient | null = null;
    try {
      qmp = await QmpClient.connect(qmpSocket, { signal, timeoutMs: 30_000 });
      // Loaded and left paused (the stream was saved from a stopped VM), then devices only out.
      await loadVmState(qmp, INCOMING_FD, { ignoreShared: false, run: false, signal });
      await saveVmState(qmp, image.stateFile, { ignoreShared: true, socketDir: runDir, signal });
    } finally {
      qmp?.close();
      // Killed now (its guest never ran and is stopped: nothing writes the RAM file after the
      // save); its exit, its uid's grants, its tap and files are given back after the image is
      // published, not before: the children waiting for it start meanwhile (close() waits for it).
      child.kill("SIGKILL");
      this.afterBuild(async () => {
        await exited;
        await lease?.release();
        if (tap) await this.taps?.release(tap);
        rmSync(runDir, { recursive: true, force: true });
        rmSync(disk, { force: true });
      });
    }
    writeFileSync(path.join(dir, "image.json.tmp"), JSON.stringify({ ...image, source: memState }));
    renameSync(path.join(dir, "image.json.tmp"), path.join(dir, "image.json"));
    return image;
  }

  /** Runs a finished build's cleanup in the background; close() waits for it. */
  private afterBuild(cleanup: () => Promise<void>): void {
    const p: Promise<void> = cleanup()
      .catch(() => {})
      .finally(() => this.cleanups.delete(p));
    this.cleanups.add(p);
  }
}
